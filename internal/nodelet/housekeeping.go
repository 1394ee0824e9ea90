package nodelet

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

func (n *Nodelet) onTerminated(uid types.UID) {
	// The same pod may have come back while it was terminating. Otherwise
	// the worker's memory of the finished pod stays until housekeeping sees
	// the runtime no longer has it, so a stale relist cannot start a second
	// termination.
	if p, ok := n.pods.Get(uid); ok && p.DeletionTimestamp == nil {
		n.workers.Forget(uid)
		n.workers.Sync(p)
	}
}

// housekeeping admits pods that waited for the Node, stops runtime pods
// nobody wants and removes directories of pods that are gone. Stopping waits
// for every source to have been seen, so pods are never killed just because
// their source (the API server) is slow or unreachable.
func (n *Nodelet) housekeeping(ctx context.Context) {
	n.admitPending(ctx)
	if !n.sourcesReady.Load() {
		return
	}
	running, ok := n.pleg.RunningPods()
	if !ok {
		return
	}
	logger := klog.FromContext(ctx)
	inRuntime := map[types.UID]bool{}
	for _, rp := range running {
		inRuntime[rp.UID] = true
		if _, want := n.pods.Get(rp.UID); want || n.workers.Has(rp.UID) {
			continue
		}
		logger.Info("Found a pod in the runtime that is not desired; terminating it", "pod", klog.KRef(rp.Namespace, rp.Name), "podUID", rp.UID)
		n.workers.Terminate(rp.UID, nil, rp, nil)
	}
	for _, uid := range n.workers.Finished() {
		if !inRuntime[uid] {
			n.workers.Forget(uid)
		}
	}
	// Directories of pods that are gone.
	if uids, err := n.volumes.PodUIDs(); err == nil {
		for _, uid := range uids {
			if _, want := n.pods.Get(uid); want || inRuntime[uid] || n.workers.Has(uid) {
				continue
			}
			if err := n.volumes.Teardown(uid); err != nil {
				logger.Error(err, "Cannot remove the directory of a removed pod", "podUID", uid)
			} else {
				logger.V(2).Info("Removed the directory of a removed pod", "podUID", uid)
			}
		}
	}
	n.cleanLogDirs(ctx, inRuntime)
	n.cleanupPodCgroups(ctx, func(uid types.UID) bool {
		_, want := n.pods.Get(uid)
		return want || inRuntime[uid] || n.workers.Has(uid)
	})
	n.runtime.GCBackoff()
}

// cleanLogDirs removes <podLogsDir>/<ns>_<name>_<uid> of pods that are gone.
func (n *Nodelet) cleanLogDirs(ctx context.Context, inRuntime map[types.UID]bool) {
	entries, err := os.ReadDir(n.opts.Config.PodLogsDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		parts := strings.Split(e.Name(), "_")
		if !e.IsDir() || len(parts) != 3 {
			continue
		}
		uid := types.UID(parts[2])
		if _, want := n.pods.Get(uid); want || inRuntime[uid] || n.workers.Has(uid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(n.opts.Config.PodLogsDir, e.Name())); err == nil {
			klog.FromContext(ctx).V(2).Info("Removed the logs of a removed pod", "podUID", uid)
		}
	}
}
