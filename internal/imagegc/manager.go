package imagegc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/tracing"
)

// DefaultPeriod is how often images are collected, as upstream.
const DefaultPeriod = 5 * time.Minute

// The events and reasons, as upstream.
const (
	EventFreeDiskSpaceFailed = "FreeDiskSpaceFailed"
	EventImageGCFailed       = "ImageGCFailed"
	ReasonAge                = "age"
	ReasonSpace              = "space"
)

// FsStats gives the image filesystem's capacity and what is available on
// it (stats.Provider's imagefs).
type FsStats func(ctx context.Context) (capacity, available int64, err error)

// Config configures a Manager.
type Config struct {
	// Images and Runtime are the CRI services: the images, and the
	// containers that use them. Required.
	Images  internalapi.ImageManagerService
	Runtime internalapi.RuntimeService
	// FsStats is required.
	FsStats FsStats
	// HighThresholdPercent, LowThresholdPercent, MinAge and MaxAge are the
	// policy (imageGCHighThresholdPercent, imageGCLowThresholdPercent,
	// imageMinimumGCAge, imageMaximumGCAge; MaxAge 0: no age limit). A
	// high threshold of 100 disables collection for space.
	HighThresholdPercent, LowThresholdPercent int
	MinAge, MaxAge                            time.Duration
	// Period defaults to DefaultPeriod.
	Period time.Duration
	// StateFile keeps the images' first-seen and last-used times across
	// restarts; empty: in memory only.
	StateFile string
	// Recorder and Node get the node's events; Recorder is required.
	Recorder record.EventRecorder
	Node     *v1.ObjectReference
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// AfterCollect, when set, gets the images left after each collection
	// and the time the collection began, before it listed them (upstream's
	// post-GC hooks: the image pull records of images gone are pruned).
	AfterCollect func(ctx context.Context, images []string, began time.Time)
	// Tracer records an Images/GarbageCollect span per collection, as
	// upstream; nil records none.
	Tracer trace.Tracer
}

// Manager collects unused images.
type Manager struct {
	cfg   Config
	began time.Time

	mu      sync.Mutex // serializes collections and guards records
	records map[string]*Record
}

// New returns a Manager for cfg, with the records of cfg.StateFile.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Images == nil:
		return nil, errors.New("imagegc: Config.Images is required")
	case cfg.Runtime == nil:
		return nil, errors.New("imagegc: Config.Runtime is required")
	case cfg.FsStats == nil:
		return nil, errors.New("imagegc: Config.FsStats is required")
	case cfg.Recorder == nil:
		return nil, errors.New("imagegc: Config.Recorder is required")
	case cfg.HighThresholdPercent < 0 || cfg.HighThresholdPercent > 100 || cfg.LowThresholdPercent < 0 || cfg.LowThresholdPercent > 100:
		return nil, fmt.Errorf("imagegc: thresholds %d/%d: want percentages", cfg.HighThresholdPercent, cfg.LowThresholdPercent)
	case cfg.LowThresholdPercent > cfg.HighThresholdPercent:
		return nil, fmt.Errorf("imagegc: low threshold %d is above the high threshold %d", cfg.LowThresholdPercent, cfg.HighThresholdPercent)
	}
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Tracer == nil {
		cfg.Tracer = tracing.Noop()
	}
	m := &Manager{cfg: cfg, began: cfg.Clock.Now(), records: map[string]*Record{}}
	if cfg.StateFile != "" {
		if data, err := os.ReadFile(cfg.StateFile); err == nil {
			if err := json.Unmarshal(data, &m.records); err != nil {
				return nil, fmt.Errorf("imagegc: %s: %w", cfg.StateFile, err)
			}
			for id, r := range m.records {
				r.ID = id
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("imagegc: %w", err)
		}
	}
	return m, nil
}

// Run collects every period until ctx ends; a failure twice in a row is a
// node event (ImageGCFailed), as upstream.
func (m *Manager) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	tick := m.cfg.Clock.NewTicker(m.cfg.Period)
	defer tick.Stop()
	failedBefore := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
		}
		if err := m.GarbageCollect(ctx); err != nil {
			if failedBefore {
				logger.Error(err, "Image garbage collection failed multiple times in a row")
				m.event(v1.EventTypeWarning, EventImageGCFailed, err.Error())
			} else {
				logger.Error(err, "Image garbage collection failed once")
			}
			failedBefore = true
			continue
		}
		failedBefore = false
	}
}

func (m *Manager) event(typ, reason, msg string) {
	if m.cfg.Node != nil {
		m.cfg.Recorder.Event(m.cfg.Node, typ, reason, msg)
	}
}

// GarbageCollect runs one collection: the images unused for MaxAge, then,
// over the high threshold, the least recently used until the low one.
func (m *Manager) GarbageCollect(ctx context.Context) error {
	ctx, span := m.cfg.Tracer.Start(ctx, "Images/GarbageCollect")
	defer span.End()
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	cands, err := m.detect(ctx, now)
	if err != nil {
		return err
	}
	defer m.afterCollect(ctx, now)
	removed, err := m.remove(ctx, Old(cands, now, m.began, m.cfg.MaxAge), ReasonAge)
	if err != nil {
		return fmt.Errorf("wanted to free images older than %v: %w", m.cfg.MaxAge, err)
	}
	if len(removed) > 0 {
		var left []Record
		for _, c := range cands {
			if !removed[c.ID] {
				left = append(left, c)
			}
		}
		cands = left
	}
	capacity, available, err := m.cfg.FsStats(ctx)
	if err != nil {
		return fmt.Errorf("image filesystem stats: %w", err)
	}
	if capacity <= 0 {
		err := errors.New("invalid capacity 0 on image filesystem")
		m.event(v1.EventTypeWarning, "InvalidDiskCapacity", err.Error())
		return err
	}
	want := ToFree(capacity, available, m.cfg.HighThresholdPercent, m.cfg.LowThresholdPercent)
	if want <= 0 || m.cfg.HighThresholdPercent >= 100 {
		return nil
	}
	used := UsedPercent(capacity, available)
	klog.FromContext(ctx).Info("Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold",
		"usage", used, "highThreshold", m.cfg.HighThresholdPercent, "amountToFree", want, "lowThreshold", m.cfg.LowThresholdPercent)
	sel := ForSpace(cands, want, now, m.cfg.MinAge)
	if _, err := m.remove(ctx, sel, ReasonSpace); err != nil {
		return fmt.Errorf("wanted to free %d bytes: %w", want, err)
	}
	var freed int64
	for _, c := range sel {
		freed += c.Size
	}
	if freed < want {
		msg := fmt.Sprintf("Insufficient free disk space on the node's image filesystem (%d%% of %s used). "+
			"Failed to free sufficient space by deleting unused images (freed %d bytes). "+
			"Investigate disk usage, as it could be used by active images, logs, volumes, or other data.",
			used, formatSize(capacity), freed)
		m.event(v1.EventTypeWarning, EventFreeDiskSpaceFailed, msg)
		return errors.New(msg)
	}
	return nil
}

// Reclaim removes every unused image old enough (imageMinimumGCAge): the
// eviction manager's node-level reclaim under disk pressure.
func (m *Manager) Reclaim(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	klog.FromContext(ctx).Info("Attempting to delete unused images")
	now := m.cfg.Clock.Now()
	cands, err := m.detect(ctx, now)
	if err != nil {
		return err
	}
	defer m.afterCollect(ctx, now)
	_, err = m.remove(ctx, ForSpace(cands, -1, now, m.cfg.MinAge), ReasonSpace)
	return err
}

// afterCollect gives AfterCollect the images left: the records' (detect
// keeps one per image the runtime listed, remove drops those removed).
func (m *Manager) afterCollect(ctx context.Context, began time.Time) {
	if m.cfg.AfterCollect == nil {
		return
	}
	left := make([]string, 0, len(m.records))
	for id := range m.records {
		left = append(left, id)
	}
	sort.Strings(left)
	m.cfg.AfterCollect(ctx, left, began)
}

// remove removes the images, counting them by reason; it goes on after a
// failure and reports them all.
func (m *Manager) remove(ctx context.Context, sel []Record, reason string) (map[string]bool, error) {
	logger := klog.FromContext(ctx)
	removed := map[string]bool{}
	var errs []error
	for _, c := range sel {
		logger.Info("Removing image to free bytes", "imageID", c.ID, "size", c.Size, "reason", reason)
		if err := m.cfg.Images.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: c.ID}); err != nil {
			errs = append(errs, fmt.Errorf("remove image %s: %w", c.ID, err))
			continue
		}
		delete(m.records, c.ID)
		removed[c.ID] = true
		metrics.ImageGarbageCollected.WithLabelValues(reason).Inc()
	}
	if len(removed) > 0 {
		m.save(ctx)
	}
	return removed, errors.Join(errs...)
}

// detect lists the images and the containers, updates the records (first
// seen, last used now for the images in use) and returns the candidates.
func (m *Manager) detect(ctx context.Context, now time.Time) ([]Record, error) {
	images, err := m.cfg.Images.ListImages(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	containers, err := m.cfg.Runtime.ListContainers(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	used := map[string]bool{}
	for _, c := range containers {
		used[c.GetImageRef()] = true
		used[c.GetImage().GetImage()] = true
	}
	if anyUnused(images, used) {
		// Image volumes: the images containers mount are in use too, as
		// upstream's handleImageVolumes. Only asked when it matters.
		m.addMountedImages(ctx, containers, used)
	}
	sandbox := m.sandboxImage(ctx)
	inUse := map[string]bool{}
	seen := map[string]bool{}
	changed := false
	for _, img := range images {
		id := img.GetId()
		seen[id] = true
		r := m.records[id]
		if r == nil {
			r = &Record{ID: id, FirstDetected: now}
			m.records[id] = r
			changed = true
		}
		r.Size = int64(img.GetSize())
		r.Pinned = img.GetPinned() || (sandbox != "" && refers(img, sandbox))
		if used[id] || anyUsed(img, used) {
			inUse[id] = true
			r.LastUsed = now
			changed = true
		}
	}
	for id := range m.records {
		if !seen[id] {
			delete(m.records, id)
			changed = true
		}
	}
	if changed {
		m.save(ctx)
	}
	return Candidates(m.records, inUse), nil
}

// anyUnused: an image no container names, a candidate unless a
// container mounts it.
func anyUnused(images []*runtimeapi.Image, used map[string]bool) bool {
	for _, img := range images {
		if !used[img.GetId()] && !anyUsed(img, used) {
			return true
		}
	}
	return false
}

// addMountedImages adds the images the containers mount (image volumes) to
// used. A container gone meanwhile mounts nothing.
func (m *Manager) addMountedImages(ctx context.Context, containers []*runtimeapi.Container, used map[string]bool) {
	for _, c := range containers {
		st, err := m.cfg.Runtime.ContainerStatus(ctx, c.GetId(), false)
		if err != nil {
			klog.FromContext(ctx).V(4).Info("Container status for image volumes failed", "containerID", c.GetId(), "err", err)
			continue
		}
		for _, mnt := range st.GetStatus().GetMounts() {
			if ref := mnt.GetImage().GetImage(); ref != "" {
				used[ref] = true
			}
		}
	}
}

// anyUsed: a container names the image by one of its tags or digests.
func anyUsed(img *runtimeapi.Image, used map[string]bool) bool {
	for _, ref := range append(append([]string{}, img.GetRepoTags()...), img.GetRepoDigests()...) {
		if used[ref] {
			return true
		}
	}
	return false
}

// refers: ref is one of the image's names.
func refers(img *runtimeapi.Image, ref string) bool {
	if img.GetId() == ref {
		return true
	}
	for _, r := range append(append([]string{}, img.GetRepoTags()...), img.GetRepoDigests()...) {
		if r == ref {
			return true
		}
	}
	return false
}

// sandboxImage is the runtime's sandbox (pause) image, from its verbose
// status (containerd's config.sandboxImage): runtimes that do not pin it
// (containerd before 1.7) would otherwise lose it.
func (m *Manager) sandboxImage(ctx context.Context) string {
	st, err := m.cfg.Runtime.Status(ctx, true)
	if err != nil {
		return ""
	}
	var cfg struct {
		SandboxImage string `json:"sandboxImage"`
	}
	if raw, ok := st.GetInfo()["config"]; ok && json.Unmarshal([]byte(raw), &cfg) == nil {
		return cfg.SandboxImage
	}
	return ""
}

// save writes the records to the state file (atomically); a failure is
// logged: the records are only worth a restart's memory.
func (m *Manager) save(ctx context.Context) {
	if m.cfg.StateFile == "" {
		return
	}
	data, err := json.Marshal(m.records)
	if err == nil {
		tmp := m.cfg.StateFile + ".tmp"
		if err = os.MkdirAll(filepath.Dir(tmp), 0o750); err == nil {
			if err = os.WriteFile(tmp, data, 0o600); err == nil {
				err = os.Rename(tmp, m.cfg.StateFile)
			}
		}
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot save the image records", "file", m.cfg.StateFile)
	}
}

// formatSize is a byte count as upstream's message writes it (B, KiB,
// MiB, GiB, TiB).
func formatSize(b int64) string {
	size := float64(b)
	for i, unit := range []string{"KiB", "MiB", "GiB", "TiB"} {
		size /= 1024
		if size < 1024 || i == 3 {
			if b < 1024 {
				return fmt.Sprintf("%d B", b)
			}
			return fmt.Sprintf("%.1f %s", size, unit)
		}
	}
	return ""
}
