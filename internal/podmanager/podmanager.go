package podmanager

import (
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/podspec"
)

// Changes is what a source update changed.
type Changes struct {
	Added   []*v1.Pod
	Updated []*v1.Pod
	// Previous[i] is the version Updated[i] replaced.
	Previous []*v1.Pod
	Removed  []*v1.Pod
}

// Manager holds the desired pods.
type Manager struct {
	mu       sync.RWMutex
	sources  map[string]map[types.UID]*v1.Pod
	rejected map[types.UID]bool
}

// New returns an empty Manager.
func New() *Manager {
	return &Manager{sources: map[string]map[types.UID]*v1.Pod{}, rejected: map[types.UID]bool{}}
}

// Set replaces every pod of source.
func (m *Manager) Set(source string, pods []*v1.Pod) Changes {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.sources[source]
	next := make(map[types.UID]*v1.Pod, len(pods))
	var ch Changes
	for _, p := range pods {
		next[p.UID] = p
		if o, ok := old[p.UID]; !ok {
			ch.Added = append(ch.Added, p)
		} else if !equal(o, p) {
			ch.Updated = append(ch.Updated, p)
			ch.Previous = append(ch.Previous, o)
		}
	}
	for uid, p := range old {
		if _, ok := next[uid]; !ok {
			ch.Removed = append(ch.Removed, p)
			delete(m.rejected, uid)
		}
	}
	m.sources[source] = next
	// Admit in creation order, as upstream.
	sort.SliceStable(ch.Added, func(i, j int) bool {
		return ch.Added[i].CreationTimestamp.Before(&ch.Added[j].CreationTimestamp)
	})
	return ch
}

// Upsert adds or replaces one pod of source.
func (m *Manager) Upsert(source string, pod *v1.Pod) Changes {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sources[source] == nil {
		m.sources[source] = map[types.UID]*v1.Pod{}
	}
	old, ok := m.sources[source][pod.UID]
	m.sources[source][pod.UID] = pod
	switch {
	case !ok:
		return Changes{Added: []*v1.Pod{pod}}
	case !equal(old, pod):
		return Changes{Updated: []*v1.Pod{pod}, Previous: []*v1.Pod{old}}
	}
	return Changes{}
}

// Remove drops one pod of source.
func (m *Manager) Remove(source string, pod *v1.Pod) Changes {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.sources[source][pod.UID]
	if !ok {
		return Changes{}
	}
	delete(m.sources[source], pod.UID)
	delete(m.rejected, pod.UID)
	return Changes{Removed: []*v1.Pod{old}}
}

// Reject marks a pod as refused by admission: it stays known (its status is
// reported) but never runs.
func (m *Manager) Reject(uid types.UID) {
	m.mu.Lock()
	m.rejected[uid] = true
	m.mu.Unlock()
}

// Rejected reports whether admission refused the pod.
func (m *Manager) Rejected(uid types.UID) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.rejected[uid]
}

// Get returns the desired pod with uid from any source, unless rejected.
func (m *Manager) Get(uid types.UID) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.rejected[uid] {
		return nil, false
	}
	for _, pods := range m.sources {
		if p, ok := pods[uid]; ok {
			return p, true
		}
	}
	return nil, false
}

// GetByName returns the desired pod with this namespace and name.
func (m *Manager) GetByName(namespace, name string) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, pods := range m.sources {
		for _, p := range pods {
			if p.Name == name && p.Namespace == namespace && !m.rejected[p.UID] {
				return p, true
			}
		}
	}
	return nil, false
}

// Admitted returns every desired pod that was not rejected, except exclude.
func (m *Manager) Admitted(exclude types.UID) []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*v1.Pod
	for _, pods := range m.sources {
		for uid, p := range pods {
			if uid != exclude && !m.rejected[uid] {
				out = append(out, p)
			}
		}
	}
	return out
}

// Count is the number of desired pods, rejected ones included.
func (m *Manager) Count() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for _, pods := range m.sources {
		n += len(pods)
	}
	return n
}

// equal compares what matters of two versions of a pod: everything but the
// resource version and the status.
func equal(a, b *v1.Pod) bool {
	if a == b {
		return true
	}
	am, bm := a.ObjectMeta, b.ObjectMeta
	am.ResourceVersion, bm.ResourceVersion = "", ""
	am.ManagedFields, bm.ManagedFields = nil, nil
	return apiequality.Semantic.DeepEqual(am, bm) && apiequality.Semantic.DeepEqual(a.Spec, b.Spec) && !podspec.GatesChanged(a, b)
}

// Source returns the pods of source that were not rejected.
func (m *Manager) Source(source string) []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*v1.Pod
	for uid, p := range m.sources[source] {
		if !m.rejected[uid] {
			out = append(out, p)
		}
	}
	return out
}
