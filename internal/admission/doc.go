// Package admission owns the node's admission of pods, as upstream does
// before running a pod: the pod must be bound to this node, match its node
// selector and required node affinity, tolerate its NoExecute taints, and
// fit into the node's allocatable resources next to the pods already
// admitted (OutOfcpu, OutOfmemory, OutOfpods, ...). Host port conflicts are
// checked too. A rejected pod is never run; its status says why.
package admission
