// Package pleg owns the pod lifecycle event generator: it relists the
// runtime (one ListPodSandbox and one ListContainers per period, all pods at
// once), compares with the previous relist and emits an event for each pod
// whose sandboxes or containers changed state. containerd 1.6 has no CRI
// event stream, so relisting is how nodelet learns that a container died.
//
// The Run goroutine owns the relist state; Watch and Healthy are safe for
// concurrent use.
package pleg
