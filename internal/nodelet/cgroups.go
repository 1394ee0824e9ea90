package nodelet

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/cgroups"
)

// startCgroups creates the pod cgroup manager from the configuration
// (cgroupDriver, cgroupRoot, cgroupsPerQOS, cpuCFSQuota, cpuCFSQuotaPeriod,
// podPidsLimit, the reservations and enforceNodeAllocatable) and creates
// the QoS hierarchy. As upstream, failing to is fatal: pods would run
// without their limits.
func (n *Nodelet) startCgroups(ctx context.Context) error {
	cfg := &n.opts.Config
	c := cgroups.Config{
		Driver:                 cfg.CgroupDriver,
		CgroupRoot:             cfg.CgroupRoot,
		CgroupsPerQOS:          cfg.CgroupsPerQOS == nil || *cfg.CgroupsPerQOS,
		Machine:                n.machine,
		KubeReserved:           cfg.KubeReserved,
		SystemReserved:         cfg.SystemReserved,
		EnforceNodeAllocatable: cfg.EnforceNodeAllocatable,
		KubeReservedCgroup:     cfg.KubeReservedCgroup,
		SystemReservedCgroup:   cfg.SystemReservedCgroup,
		Event: func(eventType, reason, message string) {
			n.recorder.Event(n.nodeRef(), eventType, reason, message)
		},
		DisableCPUCFSQuota: cfg.CPUCFSQuota != nil && !*cfg.CPUCFSQuota,
	}
	if cfg.CPUCFSQuotaPeriod != nil {
		c.CPUCFSQuotaPeriod = cfg.CPUCFSQuotaPeriod.Duration
	}
	if cfg.PodPidsLimit != nil {
		c.PodPidsLimit = *cfg.PodPidsLimit
	}
	m, err := cgroups.New(c)
	if err == nil {
		err = m.Start(ctx)
	}
	if err != nil {
		return fmt.Errorf("failed to start the container manager (pod cgroups, cgroupDriver %s, cgroupRoot %q, cgroupsPerQOS %v): %w",
			c.Driver, c.CgroupRoot, c.CgroupsPerQOS, err)
	}
	n.cgroups = m
	version := "v1"
	if m.CgroupV2() {
		version = "v2"
	}
	klog.FromContext(ctx).Info("Pod cgroups ready", "cgroupVersion", version, "driver", c.Driver, "cgroupsPerQOS", c.CgroupsPerQOS,
		"podsCgroup", m.PodsCgroup())
	return nil
}

// cleanupPodCgroups removes the empty cgroups of pods that are gone.
func (n *Nodelet) cleanupPodCgroups(ctx context.Context, keep func(types.UID) bool) {
	removed, err := n.cgroups.CleanupOrphans(ctx, keep)
	logger := klog.FromContext(ctx)
	for _, uid := range removed {
		logger.V(2).Info("Removed the cgroups of a removed pod", "podUID", uid)
	}
	if err != nil {
		logger.Error(err, "Cannot remove the cgroups of removed pods")
	}
}
