// Package nodelet wires the agent together and owns the main loop. Data
// flows one way:
//
//	sources (static files, API server) -> pod manager (desired pods, by UID)
//	  -> pod workers (one goroutine per pod) -> podsync (one pod's sync)
//	  -> kuberuntime (CRI) -> PLEG (what actually happened) -> pod workers
//	  -> status
//
// The main loop is the only writer of the desired state: it applies source
// updates (admitting new pods), forwards PLEG events to the pod workers
// (except those reporting what the pod's last sync already saw, which
// podsync remembers), and does housekeeping (stopping runtime pods nobody
// wants, removing directories of pods that are gone) once every source has
// been seen.
package nodelet
