package volumes

import (
	"context"
	"errors"
	"os"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/fsutil"
)

// ReasonEmptyDirSizeLimitExceeded is the event reason when a disk emptyDir
// holds more than its sizeLimit. (Upstream's eviction manager evicts the
// pod then, with the same message; eviction comes with the eviction issue.)
const ReasonEmptyDirSizeLimitExceeded = "EmptyDirSizeLimitExceeded"

// Usage is the last measurement of a disk emptyDir that has a sizeLimit.
type Usage struct {
	Volume string
	Path   string
	// Bytes is what the volume's files take on disk (blocks, hard links
	// counted once, other filesystems mounted inside left out), as du.
	Bytes      int64
	Limit      resource.Quantity
	MeasuredAt time.Time // zero: not measured yet
}

// Exceeded reports whether the volume holds more than its sizeLimit.
func (u Usage) Exceeded() bool {
	return !u.MeasuredAt.IsZero() && u.Bytes > u.Limit.Value()
}

type watched struct {
	pod      *v1.Pod
	usage    Usage
	reported bool
}

// watchUsage has Run measure a disk emptyDir with a sizeLimit.
func (m *Manager) watchUsage(pod *v1.Pod, name, dir string, limit resource.Quantity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := volumeKey{pod.UID, name}
	if w, ok := m.usage[key]; ok {
		w.pod, w.usage.Limit = pod, limit
		return
	}
	m.usage[key] = &watched{pod: pod, usage: Usage{Volume: name, Path: dir, Limit: limit}}
}

// EmptyDirUsage returns the last measurement of each disk emptyDir of the
// pod that has a sizeLimit, by volume name (for the eviction manager).
func (m *Manager) EmptyDirUsage(uid types.UID) []Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Usage
	for k, w := range m.usage {
		if k.uid == uid {
			out = append(out, w.usage)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Volume < out[j].Volume })
	return out
}

// Run measures the disk emptyDirs that have a sizeLimit every UsagePeriod
// until ctx is done, and records an EmptyDirSizeLimitExceeded event (once
// each time a volume goes over its limit).
func (m *Manager) Run(ctx context.Context) {
	t := m.cfg.Clock.NewTicker(m.cfg.UsagePeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			m.measure(ctx)
		}
	}
}

func (m *Manager) measure(ctx context.Context) {
	m.mu.Lock()
	keys := make([]volumeKey, 0, len(m.usage))
	paths := make([]string, 0, len(m.usage))
	for k, w := range m.usage {
		keys = append(keys, k)
		paths = append(paths, w.usage.Path)
	}
	m.mu.Unlock()
	for i, k := range keys {
		if ctx.Err() != nil {
			return
		}
		used, err := diskUsage(paths[i])
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				klog.FromContext(ctx).V(2).Info("Cannot measure an emptyDir", "podUID", k.uid, "volume", k.name, "err", err)
			}
			continue
		}
		now := m.cfg.Clock.Now()
		m.mu.Lock()
		w, ok := m.usage[k]
		if !ok { // torn down meanwhile
			m.mu.Unlock()
			continue
		}
		w.usage.Bytes, w.usage.MeasuredAt = used, now
		exceeded, report := w.usage.Exceeded(), false
		if exceeded && !w.reported {
			report = true
		}
		w.reported = exceeded
		pod, limit := w.pod, w.usage.Limit
		m.mu.Unlock()
		if report {
			klog.FromContext(ctx).Info("EmptyDir volume over its sizeLimit", "pod", klog.KObj(pod), "volume", k.name, "used", used, "limit", limit.String())
			if m.cfg.Recorder != nil {
				m.cfg.Recorder.Eventf(pod, v1.EventTypeWarning, ReasonEmptyDirSizeLimitExceeded,
					"Usage of EmptyDir volume %q exceeds the limit %q.", k.name, limit.String())
			}
		}
	}
}

// diskUsage is what the files under dir take on disk (fsutil.DiskUsage).
func diskUsage(dir string) (int64, error) {
	u, err := fsutil.DiskUsage(dir)
	return int64(u.Bytes), err
}
