// Package e2e holds nodelet's end-to-end tests: real nodelet processes
// against the real containerd, registry and CNI network of the local stack
// (see test/e2e/framework).
package e2e
