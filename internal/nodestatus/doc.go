// Package nodestatus owns this node's Node object: it registers the node
// (labels, taints, addresses), computes its status (capacity, allocatable
// as upstream computes it, nodeInfo, images, conditions with Ready tied to
// the runtime's own readiness) every nodeStatusUpdateFrequency, and patches
// nodes/status when something changed or nodeStatusReportFrequency passed.
// It also runs the node Lease (component-helpers' lease controller, with its
// retry behaviour when the API server is slow or gone).
//
// What the machine is (capacity, nodeInfo) is internal/machine's facts
// (Config.Machine), read once by nodelet; the reservations are subtracted by
// machine.Allocatable.
//
// Node returns the latest Node; it is safe for concurrent use.
package nodestatus
