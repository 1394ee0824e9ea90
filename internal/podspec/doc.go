// Package podspec owns what a pod spec means before it runs: the defaults the
// API server would have applied to a v1.Pod (pods from files never went
// through one), validation with clear field paths, and the derived facts the
// rest of nodelet asks about a spec (QoS class, image pull policy, container
// hashes, static-pod identity).
package podspec
