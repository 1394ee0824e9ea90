// Package podmanager owns the desired state: the pods every source wants on
// this node, by UID, and which of them admission rejected. Sources are named
// ("file", "http", "api"); a source either replaces its whole set (Set) or changes
// one pod (Upsert, Remove). Each call returns what changed, so the caller
// can hand exactly that to the pod workers.
//
// Safe for concurrent use; in nodelet only the main loop writes.
package podmanager
