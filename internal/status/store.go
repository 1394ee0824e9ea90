package status

import (
	"context"
	"fmt"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Store keeps the latest status of every pod and which ones changed since a
// Syncer last took them. Safe for concurrent use.
type Store struct {
	mu      sync.RWMutex
	entries map[types.UID]*entry
	dirty   map[types.UID]bool
	changed chan struct{}
	// versions numbers the statuses set, never reusing a number.
	versions uint64
}

type entry struct {
	pod    *v1.Pod
	status v1.PodStatus
	// version changes whenever status does (and only then): readers that
	// keep what they built from a status compare it instead of the status.
	version uint64
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{entries: map[types.UID]*entry{}, dirty: map[types.UID]bool{}, changed: make(chan struct{}, 1)}
}

// Get returns the pod's latest status.
func (s *Store) Get(uid types.UID) (v1.PodStatus, bool) {
	st, _, ok := s.GetVersioned(uid)
	return st, ok
}

// GetVersioned returns the pod's latest status and its version, which
// changes whenever the status does (never 0).
func (s *Store) GetVersioned(uid types.UID) (v1.PodStatus, uint64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.entries[uid]
	if !ok {
		return v1.PodStatus{}, 0, false
	}
	return e.status, e.version, true
}

// Changed is signalled (coalesced) whenever a status is set.
func (s *Store) Changed() <-chan struct{} { return s.changed }

// TakeDirty returns the pods whose status changed since the last call, with
// their latest status, and clears the set.
func (s *Store) TakeDirty() map[types.UID]entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[types.UID]entry, len(s.dirty))
	for uid := range s.dirty {
		if e, ok := s.entries[uid]; ok {
			out[uid] = *e
		}
	}
	s.dirty = map[types.UID]bool{}
	return out
}

// MarkDirty asks for the pod's status to be written again.
func (s *Store) MarkDirty(uid types.UID) {
	s.mu.Lock()
	if _, ok := s.entries[uid]; ok {
		s.dirty[uid] = true
	}
	s.mu.Unlock()
	s.signal()
}

func (s *Store) markAllDirty() {
	s.mu.Lock()
	for uid := range s.entries {
		s.dirty[uid] = true
	}
	s.mu.Unlock()
}

func (s *Store) signal() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Set records pod's status and logs a change of its summary to ctx's
// logger.
func (s *Store) Set(ctx context.Context, pod *v1.Pod, st v1.PodStatus) {
	s.mu.Lock()
	var old v1.PodStatus
	e, had := s.entries[pod.UID]
	if had {
		old = e.status
	}
	// The pod generation this status reflects (PodObservedGenerationTracking,
	// GA and locked on in 1.35), never going back, as upstream.
	st.ObservedGeneration = max(pod.Generation, old.ObservedGeneration)
	version := e.versionOf(old, st)
	if version == 0 {
		s.versions++
		version = s.versions
	}
	s.entries[pod.UID] = &entry{pod: pod, status: st, version: version}
	s.dirty[pod.UID] = true
	s.mu.Unlock()
	s.signal()
	if sum := Summary(st); !had || sum != Summary(old) || old.PodIP != st.PodIP {
		klog.FromContext(ctx).Info("Pod status", "pod", klog.KObj(pod), "phase", st.Phase, "podIP", st.PodIP, "containers", sum)
	}
}

// versionOf is e's version when st is its status old again (a periodic
// sync of a pod in which nothing changed), else 0.
func (e *entry) versionOf(old, st v1.PodStatus) uint64 {
	if e == nil || !apiequality.Semantic.DeepEqual(old, st) {
		return 0
	}
	return e.version
}

// Summary is a one-line digest of the container states: name=State(reason)
// with restarts, e.g. "web=Running crash=Waiting(CrashLoopBackOff)/3".
func Summary(st v1.PodStatus) string {
	var b strings.Builder
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, c := range list {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(c.Name)
			b.WriteByte('=')
			switch {
			case c.State.Running != nil:
				b.WriteString("Running")
			case c.State.Terminated != nil:
				fmt.Fprintf(&b, "Terminated(%s:%d)", c.State.Terminated.Reason, c.State.Terminated.ExitCode)
			case c.State.Waiting != nil:
				fmt.Fprintf(&b, "Waiting(%s)", c.State.Waiting.Reason)
			}
			if c.RestartCount > 0 {
				fmt.Fprintf(&b, "/%d", c.RestartCount)
			}
		}
	}
	return b.String()
}

// Delete forgets a pod.
func (s *Store) Delete(uid types.UID) {
	s.mu.Lock()
	delete(s.entries, uid)
	delete(s.dirty, uid)
	s.mu.Unlock()
}
