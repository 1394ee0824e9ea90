package podmanager

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func pod(uid, image string, created int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid, Namespace: "ns", ResourceVersion: "1",
			CreationTimestamp: metav1.NewTime(time.Unix(created, 0))},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image}}},
	}
}

func names(ps []*v1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func TestSetUpsertRemove(t *testing.T) {
	m := New()
	ch := m.Set("file", []*v1.Pod{pod("b", "x", 2), pod("a", "x", 1)})
	if got := names(ch.Added); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("added %v, want a, b in creation order", got)
	}
	// A status-only change (new resource version) is no update.
	same := pod("a", "x", 1)
	same.ResourceVersion = "2"
	same.Status.Phase = v1.PodRunning
	ch = m.Set("file", []*v1.Pod{same, pod("b", "y", 2)})
	if len(ch.Added) != 0 || len(ch.Removed) != 0 || len(ch.Updated) != 1 || ch.Updated[0].Name != "b" {
		t.Fatalf("changes %+v, want only b updated", ch)
	}
	ch = m.Set("file", []*v1.Pod{same})
	if len(ch.Removed) != 1 || ch.Removed[0].Name != "b" {
		t.Fatalf("removed %v", names(ch.Removed))
	}

	// A second source adds to the same desired state.
	if ch := m.Upsert("api", pod("c", "x", 3)); len(ch.Added) != 1 {
		t.Fatalf("upsert: %+v", ch)
	}
	if ch := m.Upsert("api", pod("c", "x", 3)); len(ch.Added)+len(ch.Updated) != 0 {
		t.Fatalf("repeated upsert changed something: %+v", ch)
	}
	if _, ok := m.Get("c"); !ok || m.Count() != 2 {
		t.Fatalf("get c / count %d", m.Count())
	}
	if p, ok := m.GetByName("ns", "a"); !ok || p.UID != "a" {
		t.Fatal("GetByName")
	}

	// Rejected pods are known but not desired, and not admitted.
	m.Reject("c")
	if _, ok := m.Get("c"); ok || !m.Rejected("c") || len(m.Admitted("")) != 1 {
		t.Fatalf("rejected pod still desired or admitted")
	}
	if ch := m.Remove("api", pod("c", "x", 3)); len(ch.Removed) != 1 || m.Rejected("c") {
		t.Fatalf("remove: %+v, rejected %v", ch, m.Rejected("c"))
	}
	if ch := m.Remove("api", pod("zz", "x", 3)); len(ch.Removed) != 0 {
		t.Fatal("removing an unknown pod changed something")
	}
}
