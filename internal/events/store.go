package events

import (
	"container/list"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	// PerPod is how many events a pod keeps.
	PerPod = 30
	// MaxPods is how many pods have events kept.
	MaxPods = 1000
)

// Store is the recent events by pod UID. Safe for concurrent use.
type Store struct {
	mu   sync.Mutex
	pods map[types.UID]*list.Element
	lru  *list.List // of *podEvents, most recent first
}

type podEvents struct {
	uid    types.UID
	events []v1.Event
}

// New returns an empty Store.
func New() *Store { return &Store{pods: map[types.UID]*list.Element{}, lru: list.New()} }

// Add keeps e when it is about a pod; an event repeated (the same reason
// and message, as client-go's correlator counts them) replaces its last
// copy.
func (s *Store) Add(e *v1.Event) {
	if e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.UID == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	uid := e.InvolvedObject.UID
	el, ok := s.pods[uid]
	if !ok {
		el = s.lru.PushFront(&podEvents{uid: uid})
		s.pods[uid] = el
		if s.lru.Len() > MaxPods {
			old := s.lru.Back()
			s.lru.Remove(old)
			delete(s.pods, old.Value.(*podEvents).uid)
		}
	} else {
		s.lru.MoveToFront(el)
	}
	pe := el.Value.(*podEvents)
	for i := range pe.events {
		if old := &pe.events[i]; old.Reason == e.Reason && old.Message == e.Message && old.InvolvedObject.FieldPath == e.InvolvedObject.FieldPath {
			pe.events = append(pe.events[:i], pe.events[i+1:]...)
			break
		}
	}
	pe.events = append(pe.events, *e.DeepCopy())
	if len(pe.events) > PerPod {
		pe.events = pe.events[len(pe.events)-PerPod:]
	}
}

// ForPod is the pod's kept events, oldest first.
func (s *Store) ForPod(uid types.UID) []v1.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.pods[uid]
	if !ok {
		return nil
	}
	return append([]v1.Event(nil), el.Value.(*podEvents).events...)
}
