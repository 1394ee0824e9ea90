// Package framework is the end-to-end test harness: it finds the local stack
// (containerd, registry, CNI) that `make stack-up` starts, or starts it, builds
// nodelet once per test binary, runs nodelet processes with private
// directories, and gives tests a CRI client to watch what really happens in
// containerd.
//
// With CI=true a stack that cannot be found or started fails the test; it is
// never skipped.
package framework
