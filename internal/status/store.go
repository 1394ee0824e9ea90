package status

import (
	"fmt"
	"strings"
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
	if sum := Summary(st); !had || sum != Summary(old) || old.PodIP != st.PodIP {
		klog.InfoS("Pod status", "pod", klog.KObj(pod), "phase", st.Phase, "podIP", st.PodIP, "containers", sum)
	}
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
	delete(s.statuses, uid)
	s.mu.Unlock()
}
