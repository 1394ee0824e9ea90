// Package nodelet is the composition root: it builds every component
// (New(Config), then setup once the runtime answers), lists the loops
// beside the pod workers in one table (loops.go) that the lifecycle group
// starts, reports and stops, and runs the main loop (internal/syncloop).
// Data flows one way:
//
//	sources -> podmanager (+ the admission chain) -> podworkers -> podsync
//	  -> kuberuntime (CRI) -> pleg -> podworkers; podsync -> status -> API
//
// No decision is made here: the adapters (adapters.go) only join two
// components that know nothing of each other.
package nodelet
