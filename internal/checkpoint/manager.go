package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodelet/nodelet/internal/apiclient"
	"github.com/nodelet/nodelet/internal/fsutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultPeriod is how often the Manager writes what changed.
const DefaultPeriod = 2 * time.Second

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	// Dir is the checkpoint's directory (<root-dir>/offline): the pods'
	// entries in Dir/pods, the Node in Dir/node.json.
	Dir string
	// Secrets lets the entries keep Secrets (--offline-secrets).
	Secrets bool
	// Pods are the API pods the node runs (admitted, not rejected).
	Pods func() []*v1.Pod
	// Status is the status nodelet last computed for a pod and its
	// version, which changes whenever the status does; a pod without one
	// has not run yet and is not kept.
	Status func(types.UID) (v1.PodStatus, uint64, bool)
	// Node is the registered Node (nil before registration).
	Node func() *v1.Node
	// Down reports whether the API server does not answer, and since when
	// (apiutil.Contact); nil: never down.
	Down func() (bool, time.Time)
	// Clock defaults to the real clock; Period to DefaultPeriod.
	Clock  clock.WithTicker
	Period time.Duration
	// MaxEntryBytes and MaxTotalBytes bound the entries (Config's defaults
	// when zero).
	MaxEntryBytes, MaxTotalBytes int64
}

// Manager keeps the checkpoint of the node's API pods: it restores them at
// start, writes each pod's entry when it changed, and prunes the entries of
// pods the API server, once synced, no longer has.
type Manager struct {
	cfg   ManagerConfig
	store *Store
	kept  *kept

	mu sync.Mutex
	// hashes are the entries' payload hashes as written, by pod.
	hashes map[types.UID][32]byte
	// written is what each pod's written entry was built from, so an
	// unchanged pod costs a comparison instead of a copy, an encoding and a
	// hash every period.
	written map[types.UID]source
	// restored are the pods run from the checkpoint that the API server has
	// not confirmed yet.
	restored map[types.UID]bool
	node     *v1.Node
	nodeRV   string
	synced   bool

	corrupt, saveErrors, served atomic.Int64
	entries                     atomic.Int64
}

// NewManager returns the Manager of cfg.Dir, creating it (0700). It fails
// when cfg has no Dir, Pods or Status.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	switch {
	case cfg.Dir == "":
		return nil, errors.New("checkpoint: ManagerConfig.Dir is required")
	case cfg.Pods == nil:
		return nil, errors.New("checkpoint: ManagerConfig.Pods is required")
	case cfg.Status == nil:
		return nil, errors.New("checkpoint: ManagerConfig.Status is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Node == nil {
		cfg.Node = func() *v1.Node { return nil }
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	st, err := New(Config{Dir: filepath.Join(cfg.Dir, "pods"), MaxEntryBytes: cfg.MaxEntryBytes, MaxTotalBytes: cfg.MaxTotalBytes, Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, store: st, kept: newKept(cfg.Secrets), hashes: map[types.UID][32]byte{}, written: map[types.UID]source{}, restored: map[types.UID]bool{}}, nil
}

func (m *Manager) nodePath() string { return filepath.Join(m.cfg.Dir, "node.json") }

// Restore reads the checkpoint: it returns the pods to run until the API
// server is synced, each with the status nodelet last wrote, and keeps
// their objects for the Getter. Corrupt entries are logged and skipped.
func (m *Manager) Restore(ctx context.Context) []*v1.Pod {
	logger := klog.FromContext(ctx)
	entries, errs := m.store.Load()
	for _, err := range errs {
		m.corrupt.Add(1)
		logger.Error(err, "Skipping a checkpoint entry that cannot be read")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var pods []*v1.Pod
	for _, e := range entries {
		m.kept.add(e)
		if h, err := payloadHash(e); err == nil {
			m.hashes[e.Pod.UID] = h
		}
		m.restored[e.Pod.UID] = true
		pods = append(pods, e.Pod)
		logger.Info("Pod restored from the checkpoint", "pod", klog.KObj(e.Pod), "podUID", e.Pod.UID, "phase", e.Pod.Status.Phase, "savedAt", e.SavedAt)
	}
	m.entries.Store(int64(len(entries)))
	if b, err := os.ReadFile(m.nodePath()); err == nil {
		var n v1.Node
		if err := decode(b, &n); err != nil {
			m.corrupt.Add(1)
			logger.Error(err, "Skipping the checkpoint's Node, which cannot be read", "path", m.nodePath())
		} else {
			m.node, m.nodeRV = &n, n.ResourceVersion
		}
	}
	logger.Info("Read the offline checkpoint", "pods", len(pods), "corrupt", len(errs), "dir", m.cfg.Dir)
	return pods
}

// Restored reports whether the pod runs from the checkpoint, not yet
// confirmed by the API server.
func (m *Manager) Restored(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.restored[uid]
}

// Node is the Node last registered, as the checkpoint keeps it (nil: none).
func (m *Manager) Node() *v1.Node {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.node
}

// Synced tells the Manager the API server's full set of pods arrived: the
// pods restored are confirmed or removed by it, and from now on the entries
// of pods that are gone are pruned.
func (m *Manager) Synced(ctx context.Context, apiPods []*v1.Pod) {
	in := map[types.UID]bool{}
	for _, p := range apiPods {
		in[p.UID] = true
	}
	m.mu.Lock()
	kept, gone := 0, 0
	for uid := range m.restored {
		if in[uid] {
			kept++
		} else {
			gone++
		}
	}
	was := len(m.restored)
	m.restored = map[types.UID]bool{}
	m.synced = true
	m.mu.Unlock()
	if was > 0 {
		klog.FromContext(ctx).Info("API server synced: the pods run from the checkpoint are reconciled", "restored", was, "stillInAPI", kept, "goneFromAPI", gone)
	}
}

// Getter returns the read-through Getter over api (ConfigMaps, Secrets,
// tokens), client (CSI objects) and services (the service environment).
func (m *Manager) Getter(api API, client apiclient.Interface, services func(string, bool) (map[string]string, error)) *Getter {
	return &Getter{api: api, client: client, services: services, kept: m.kept, served: func(string) { m.served.Add(1) }}
}

// Run writes what changed every Period until ctx is done.
func (m *Manager) Run(ctx context.Context) error {
	t := m.cfg.Clock.NewTicker(m.cfg.Period)
	defer t.Stop()
	wasDown := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			m.Save(ctx)
			wasDown = m.logTransition(ctx, wasDown)
		}
	}
}

// logTransition logs when the API server stops or starts answering.
func (m *Manager) logTransition(ctx context.Context, wasDown bool) bool {
	s := m.State()
	switch {
	case s.Down && !wasDown:
		klog.FromContext(ctx).Info("API server unreachable: pods keep running from the offline checkpoint",
			"since", s.DownSince, "podsCheckpointed", s.Entries, "podsFromCheckpoint", len(s.FromCheckpoint))
	case !s.Down && wasDown:
		klog.FromContext(ctx).Info("API server answers again", "podsFromCheckpoint", len(s.FromCheckpoint))
	}
	return s.Down
}

// Save writes the entry of every pod that changed since it was last
// written, and the Node; once synced, it prunes the entries of pods that
// are gone.
func (m *Manager) Save(ctx context.Context) {
	logger := klog.FromContext(ctx)
	pods := m.cfg.Pods()
	want := map[types.UID]bool{}
	for _, p := range pods {
		want[p.UID] = true
		st, version, ok := m.cfg.Status(p.UID)
		if !ok {
			continue
		}
		src := source{resourceVersion: p.ResourceVersion, kept: m.kept.gen.Load(), status: version}
		m.mu.Lock()
		last, seen := m.written[p.UID]
		m.mu.Unlock()
		if seen && last.same(src) {
			continue
		}
		e := m.entryFor(p, st)
		h, err := payloadHash(e)
		if err != nil {
			continue
		}
		m.mu.Lock()
		same := m.hashes[p.UID] == h
		if same {
			m.written[p.UID] = src
		}
		m.mu.Unlock()
		if same {
			continue
		}
		if err := m.store.Save(e); err != nil {
			m.saveErrors.Add(1)
			logger.Error(err, "Cannot write the pod's checkpoint entry", "pod", klog.KObj(p))
			continue
		}
		m.mu.Lock()
		m.hashes[p.UID] = h
		m.written[p.UID] = src
		m.mu.Unlock()
		logger.V(4).Info("Wrote the pod's checkpoint entry", "pod", klog.KObj(p))
	}
	m.saveNode(logger)
	m.mu.Lock()
	synced := m.synced
	m.mu.Unlock()
	if synced {
		err := m.store.Prune(func(uid types.UID) bool { return want[uid] })
		if err != nil {
			logger.Error(err, "Cannot prune the checkpoint")
		}
		m.mu.Lock()
		for uid := range m.hashes {
			if !want[uid] {
				delete(m.hashes, uid)
				delete(m.written, uid)
				logger.V(2).Info("Removed the checkpoint entry of a pod that is gone", "podUID", uid)
			}
		}
		m.mu.Unlock()
	}
	m.mu.Lock()
	m.entries.Store(int64(len(m.hashes)))
	m.mu.Unlock()
}

func (m *Manager) saveNode(logger klog.Logger) {
	n := m.cfg.Node()
	if n == nil {
		return
	}
	m.mu.Lock()
	same := n.ResourceVersion == m.nodeRV
	m.mu.Unlock()
	if same {
		return
	}
	c := n.DeepCopy()
	c.ManagedFields = nil
	c.Status.Images = nil // large, and not what admission needs
	b, err := encode(c)
	if err == nil {
		err = fsutil.WriteFileAtomic(m.nodePath(), b, 0o600)
	}
	if err != nil {
		m.saveErrors.Add(1)
		logger.Error(err, "Cannot write the Node's checkpoint", "path", m.nodePath())
		return
	}
	m.mu.Lock()
	m.node, m.nodeRV = c, n.ResourceVersion
	m.mu.Unlock()
}

// entryFor is pod's entry: the pod with status st, and the objects kept for
// it.
func (m *Manager) entryFor(p *v1.Pod, st v1.PodStatus) *Entry {
	c := p.DeepCopy()
	c.ManagedFields = nil
	c.Status = *st.DeepCopy()
	e := m.kept.entry(c)
	e.Pod = c
	return &e
}

// source is what a pod's entry is built from: the pod at a resourceVersion,
// the kept objects at a generation, and the pod's status at a version.
type source struct {
	resourceVersion string
	kept            uint64
	status          uint64
}

// same tells whether an entry built from s would be the one built from o.
// A pod without a resourceVersion (never from the API server) is never
// taken as unchanged.
func (s source) same(o source) bool {
	return s.resourceVersion != "" && s == o
}

// payloadHash hashes an entry without its time stamp.
func payloadHash(e *Entry) ([32]byte, error) {
	c := *e
	c.SavedAt = time.Time{}
	b, err := json.Marshal(&c)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}

// State is the offline state, for healthz, the metrics and the log.
type State struct {
	// Down: the API server does not answer, since DownSince.
	Down      bool
	DownSince time.Time
	// FromCheckpoint are the pods run from the checkpoint that the API
	// server has not confirmed yet, sorted.
	FromCheckpoint []types.UID
	// Entries is the number of pods checkpointed; Corrupt the entries that
	// could not be read at start.
	Entries, Corrupt int64
}

// State returns the offline state.
func (m *Manager) State() State {
	var s State
	if m.cfg.Down != nil {
		s.Down, s.DownSince = m.cfg.Down()
	}
	m.mu.Lock()
	for uid := range m.restored {
		s.FromCheckpoint = append(s.FromCheckpoint, uid)
	}
	m.mu.Unlock()
	sort.Slice(s.FromCheckpoint, func(i, j int) bool { return s.FromCheckpoint[i] < s.FromCheckpoint[j] })
	s.Entries, s.Corrupt = m.entries.Load(), m.corrupt.Load()
	return s
}

// Describe is State in one line, for /healthz?verbose.
func (s State) Describe(now time.Time) string {
	api := "API server reachable"
	if s.Down {
		api = fmt.Sprintf("API server unreachable for %v", now.Sub(s.DownSince).Round(time.Second))
	}
	return fmt.Sprintf("%s; %d pods run from the checkpoint; %d pods checkpointed; %d corrupt entries skipped",
		api, len(s.FromCheckpoint), s.Entries, s.Corrupt)
}
