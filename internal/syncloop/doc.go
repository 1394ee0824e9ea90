// Package syncloop owns the main loop, upstream's syncLoop: the only
// writer of the desired state. Data flows one way through it:
//
//	sources (static files, API server) -> pod manager (desired pods, by UID)
//	  -> admission chain -> pod workers (one goroutine per pod)
//
// It applies the sources' updates (admitting new pods through the
// admission chain, or keeping them pending until the Node is registered),
// forwards PLEG events to the pod workers (except those reporting what
// the pod's last sync already saw) and probe results, and does
// housekeeping once every source has been seen: it stops runtime pods
// nobody wants and removes what pods that are gone left behind (their
// directories, logs and cgroups).
package syncloop
