package csi

import (
	"context"
	"fmt"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// resizeConditions are the PVC conditions of an expansion, as upstream's
// knownResizeConditions.
var resizeConditions = map[v1.PersistentVolumeClaimConditionType]bool{
	v1.PersistentVolumeClaimResizing:                true,
	v1.PersistentVolumeClaimFileSystemResizePending: true,
	v1.PersistentVolumeClaimControllerResizeError:   true,
	v1.PersistentVolumeClaimNodeResizeError:         true,
}

// NodeExpansionNeeded reports whether the node must grow the volume of pvc
// (bound to pv) and to which size: the PV grew beyond the PVC's capacity
// and the controller side is done (NodeResizePending; NodeResizeInProgress:
// a node attempt failed or was cut, tried again), as upstream's node
// expander.
func NodeExpansionNeeded(pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) (resource.Quantity, bool) {
	pvSize := pv.Spec.Capacity[v1.ResourceStorage]
	have := pvc.Status.Capacity[v1.ResourceStorage]
	if pvSize.Cmp(have) <= 0 {
		return pvSize, false
	}
	switch pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage] {
	case v1.PersistentVolumeClaimNodeResizePending, v1.PersistentVolumeClaimNodeResizeInProgress:
		return pvSize, true
	}
	return pvSize, false
}

// ExpansionFinished is pvc's status once the node grew it to size, as
// upstream's MarkNodeExpansionFinishedWithRecovery: the capacity, no
// resize status, no resize condition.
func ExpansionFinished(pvc *v1.PersistentVolumeClaim, size resource.Quantity) *v1.PersistentVolumeClaim {
	p := pvc.DeepCopy()
	if p.Status.Capacity == nil {
		p.Status.Capacity = v1.ResourceList{}
	}
	p.Status.Capacity[v1.ResourceStorage] = size
	delete(p.Status.AllocatedResourceStatuses, v1.ResourceStorage)
	if len(p.Status.AllocatedResourceStatuses) == 0 {
		p.Status.AllocatedResourceStatuses = nil
	}
	var conds []v1.PersistentVolumeClaimCondition
	for _, c := range p.Status.Conditions {
		if !resizeConditions[c.Type] {
			conds = append(conds, c)
		}
	}
	p.Status.Conditions = conds
	return p
}

// ExpansionFailed is pvc's status after a failed node expansion, as
// upstream's MarkNodeExpansionFailedCondition: a NodeResizeError
// condition, NodeResizeInProgress kept (tried again).
func ExpansionFailed(pvc *v1.PersistentVolumeClaim, err error, now time.Time) *v1.PersistentVolumeClaim {
	p := pvc.DeepCopy()
	var conds []v1.PersistentVolumeClaimCondition
	for _, c := range p.Status.Conditions {
		if c.Type != v1.PersistentVolumeClaimNodeResizeError {
			conds = append(conds, c)
		}
	}
	p.Status.Conditions = append(conds, v1.PersistentVolumeClaimCondition{Type: v1.PersistentVolumeClaimNodeResizeError,
		Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(now), Message: fmt.Sprintf("failed to expand pvc with %v", err)})
	return p
}

// RunExpansion looks every ExpansionPeriod at the PVCs of the volumes
// published on the node and finishes their expansion on the node
// (NodeExpandVolume) when the controller side grew them, until ctx is
// done. The node may not list PVCs, so each is read (one GET per PVC per
// period). Standalone (no Client) it returns at once.
func (p *VolumePlugin) RunExpansion(ctx context.Context) error {
	if p.cfg.Client == nil {
		return nil
	}
	wait.UntilWithContext(ctx, p.expandAll, p.cfg.ExpansionPeriod)
	return nil
}

func (p *VolumePlugin) expandAll(ctx context.Context) {
	p.mu.Lock()
	var vols []*setUp
	seen := map[string]bool{}
	for _, s := range p.set {
		if s.claim != "" && s.spec != nil && !seen[s.claimNS+"/"+s.claim] {
			seen[s.claimNS+"/"+s.claim] = true
			vols = append(vols, s)
		}
	}
	p.mu.Unlock()
	for _, s := range vols {
		p.expand(ctx, s)
	}
}

func (p *VolumePlugin) expand(ctx context.Context, s *setUp) {
	logger := klog.FromContext(ctx)
	pvcs := p.cfg.Client.CoreV1().PersistentVolumeClaims(s.claimNS)
	pvc, err := pvcs.Get(ctx, s.claim, metav1.GetOptions{})
	if err != nil || pvc.Spec.VolumeName != s.spec.PV {
		return
	}
	pv, err := p.cfg.Client.CoreV1().PersistentVolumes().Get(ctx, s.spec.PV, metav1.GetOptions{})
	if err != nil {
		return
	}
	size, needed := NodeExpansionNeeded(pvc, pv)
	if !needed {
		return
	}
	drv, ok := p.cfg.Drivers.Get(s.spec.Driver)
	if !ok {
		return
	}
	conn, err := p.conn(drv.Endpoint)
	if err != nil {
		return
	}
	node := csipb.NewNodeClient(conn)
	caps, err := p.nodeCaps(ctx, node)
	if err != nil {
		return
	}
	inProgress := pvc.DeepCopy()
	if inProgress.Status.AllocatedResourceStatuses == nil {
		inProgress.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{}
	}
	inProgress.Status.AllocatedResourceStatuses[v1.ResourceStorage] = v1.PersistentVolumeClaimNodeResizeInProgress
	if pvc, err = pvcs.UpdateStatus(ctx, inProgress, metav1.UpdateOptions{}); err != nil {
		logger.V(2).Info("Cannot mark the PVC's node expansion in progress; tried again", "pvc", klog.KRef(s.claimNS, s.claim), "err", err)
		return
	}
	// Without EXPAND_VOLUME the driver needs nothing of the node.
	if caps[csipb.NodeServiceCapability_RPC_EXPAND_VOLUME] {
		staging := ""
		if caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
			staging = StagingPath(p.cfg.RootDir, s.spec.Driver, s.spec.Handle)
		}
		cctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
		_, err = node.NodeExpandVolume(cctx, &csipb.NodeExpandVolumeRequest{
			VolumeId: s.spec.Handle, VolumePath: s.target, StagingTargetPath: staging,
			CapacityRange: &csipb.CapacityRange{RequiredBytes: size.Value()}, VolumeCapability: Capability(s.spec, false, ""),
		})
		cancel()
		if err != nil {
			logger.Error(err, "NodeExpandVolume failed", "pvc", klog.KRef(s.claimNS, s.claim), "pv", s.spec.PV)
			p.event(s, v1.EventTypeWarning, "VolumeResizeFailed", fmt.Sprintf("MountVolume.NodeExpandVolume failed for volume %q : %v", s.spec.PV, err))
			_, _ = pvcs.UpdateStatus(ctx, ExpansionFailed(pvc, err, p.cfg.Clock.Now()), metav1.UpdateOptions{})
			return
		}
	}
	if _, err := pvcs.UpdateStatus(ctx, ExpansionFinished(pvc, size), metav1.UpdateOptions{}); err != nil {
		logger.Error(err, "Cannot mark the PVC's node expansion finished; tried again", "pvc", klog.KRef(s.claimNS, s.claim))
		return
	}
	p.mu.Lock()
	s.usage = nil // measured afresh
	p.mu.Unlock()
	logger.Info("Volume expanded on the node", "pvc", klog.KRef(s.claimNS, s.claim), "pv", s.spec.PV, "size", size.String())
	p.event(s, v1.EventTypeNormal, "FileSystemResizeSuccessful", fmt.Sprintf("MountVolume.NodeExpandVolume succeeded for volume %q %s", s.spec.PV, p.cfg.NodeName))
}

func (p *VolumePlugin) event(s *setUp, typ, reason, msg string) {
	if p.cfg.Recorder != nil && s.pod != nil {
		p.cfg.Recorder.Event(s.pod, typ, reason, msg)
	}
}
