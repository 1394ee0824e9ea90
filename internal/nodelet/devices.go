package nodelet

import (
	"context"
	"maps"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/devicemanager"
	"github.com/nodelet/nodelet/internal/metrics"
)

// newDevices creates the device plugin manager on
// <root-dir>/device-plugins.
func (n *Nodelet) newDevices() (*devicemanager.Manager, error) {
	return devicemanager.New(devicemanager.Config{
		Dir:          filepath.Join(n.opts.RootDir, devicemanager.Dir),
		ActivePods:   n.deviceHolders,
		SourcesReady: n.sourcesReady.Load,
		OnChange: func() {
			if n.nodeStatus != nil {
				n.nodeStatus.Refresh()
			}
		},
		Registerer: metrics.Kubelet,
		Clock:      n.clock,
	})
}

// startDevices restores the device assignments and serves device plugin
// registration.
func (n *Nodelet) startDevices(ctx context.Context, goRun func(func())) error {
	if err := n.devices.Start(ctx); err != nil {
		return err
	}
	goRun(func() {
		if err := n.devices.Run(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Device plugin registration stopped")
		}
	})
	return nil
}

// admitDevices assigns the pod its devices, as upstream's resource
// allocation admission handler.
func (n *Nodelet) admitDevices(ctx context.Context, p *v1.Pod) admission.Result {
	if err := n.devices.Allocate(ctx, p); err != nil {
		return admission.Result{Reason: "UnexpectedAdmissionError", Message: "Allocate failed due to " + err.Error() + ", which is unexpected"}
	}
	return admission.Result{Admit: true}
}

// withDevices is node with the device plugins' allocatable as they are
// now (the Node's status may not carry them yet), at least what pods hold.
func (n *Nodelet) withDevices(node *v1.Node) *v1.Node {
	alloc := n.devices.AdmissionAllocatable()
	if len(alloc) == 0 {
		return node
	}
	out := node.DeepCopy()
	if out.Status.Allocatable == nil {
		out.Status.Allocatable = v1.ResourceList{}
	}
	maps.Copy(out.Status.Allocatable, alloc)
	return out
}

// deviceHolders are the pods that may hold devices: the live ones and
// those waiting for the Node to be admitted (owned by the main loop, where
// allocation runs).
func (n *Nodelet) deviceHolders() []*v1.Pod {
	return append(n.livePods(), n.pendingAdmission...)
}
