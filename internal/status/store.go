package status

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Store keeps the latest status of every pod. Safe for concurrent use.
type Store struct {
	mu       sync.RWMutex
	statuses map[types.UID]v1.PodStatus
}

// NewStore returns an empty Store.
func NewStore() *Store { return &Store{statuses: map[types.UID]v1.PodStatus{}} }

// Get returns the pod's latest status.
func (s *Store) Get(uid types.UID) (v1.PodStatus, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, ok := s.statuses[uid]
	return st, ok
}

// Set records pod's status and logs a phase change.
func (s *Store) Set(pod *v1.Pod, st v1.PodStatus) {
	s.mu.Lock()
	old, had := s.statuses[pod.UID]
	s.statuses[pod.UID] = st
	s.mu.Unlock()
	if !had || old.Phase != st.Phase || old.PodIP != st.PodIP {
		klog.InfoS("Pod status", "pod", klog.KObj(pod), "phase", st.Phase, "podIP", st.PodIP)
	}
}

// Delete forgets a pod.
func (s *Store) Delete(uid types.UID) {
	s.mu.Lock()
	delete(s.statuses, uid)
	s.mu.Unlock()
}
