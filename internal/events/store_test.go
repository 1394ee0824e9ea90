package events

import (
	"fmt"
	"testing"
	"testing/synctest"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func ev(uid, reason, msg string, count int32) *v1.Event {
	return &v1.Event{InvolvedObject: v1.ObjectReference{Kind: "Pod", UID: types.UID(uid)}, Reason: reason, Message: msg, Count: count}
}

func TestStore(t *testing.T) {
	s := New()
	s.Add(ev("a", "Pulled", "x", 1))
	s.Add(ev("a", "BackOff", "back-off", 1))
	s.Add(ev("a", "BackOff", "back-off", 2)) // repeated: replaces
	s.Add(&v1.Event{InvolvedObject: v1.ObjectReference{Kind: "Node", UID: "n"}, Reason: "NodeReady"})
	got := s.ForPod("a")
	if len(got) != 2 || got[0].Reason != "Pulled" || got[1].Count != 2 {
		t.Fatalf("events %+v", got)
	}
	if s.ForPod("n") != nil {
		t.Fatal("a node event kept")
	}
	for i := 0; i < PerPod+5; i++ {
		s.Add(ev("b", "R", fmt.Sprint(i), 1))
	}
	if b := s.ForPod("b"); len(b) != PerPod || b[0].Message != "5" {
		t.Fatalf("per-pod bound: %d events, first %q", len(b), b[0].Message)
	}
	for i := 0; i < MaxPods; i++ {
		s.Add(ev(fmt.Sprint("p", i), "R", "m", 1))
	}
	if s.ForPod("a") != nil || s.ForPod(types.UID(fmt.Sprint("p", MaxPods-1))) == nil {
		t.Fatal("the least recently touched pod not forgotten first")
	}
}

// The recorder keeps a pod's events in the store, with the kubelet as
// their source.
func TestNewRecorder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		r, stop := NewRecorder(nil, "n1", s)
		pod := &v1.Pod{}
		pod.Name, pod.Namespace, pod.UID = "p", "ns", "u1"
		r.Event(pod, v1.EventTypeWarning, "BackOff", "restarting")
		synctest.Wait() // the broadcaster delivers asynchronously
		got := s.ForPod("u1")
		if len(got) != 1 || got[0].Reason != "BackOff" || got[0].Source.Component != "kubelet" || got[0].Source.Host != "n1" {
			t.Errorf("events %+v", got)
		}
		stop()
	})
}
