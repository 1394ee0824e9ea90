package kuberuntime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/internal/ctortest"
)

type removableAll bool

func (r removableAll) Removable(string) bool { return bool(r) }

func TestNewGC(t *testing.T) {
	m, _, _ := newTestManager(t)
	full := GCConfig{Manager: m, Pods: removableAll(true), Recorder: record.NewFakeRecorder(1), Node: &v1.ObjectReference{Kind: "Node", Name: "n"},
		Period: time.Minute, SourcesReady: func() bool { return true }}
	without := func(f func(*GCConfig)) GCConfig { c := full; f(&c); return c }
	ctortest.Run(t, NewGC, []ctortest.Case[GCConfig]{
		{Name: "no manager", Config: without(func(c *GCConfig) { c.Manager = nil }), WantErr: "GCConfig.Manager is required"},
		{Name: "no pods", Config: without(func(c *GCConfig) { c.Pods = nil }), WantErr: "GCConfig.Pods is required"},
		{Name: "no recorder", Config: without(func(c *GCConfig) { c.Recorder = nil }), WantErr: "GCConfig.Recorder is required"},
		{Name: "no node", Config: without(func(c *GCConfig) { c.Node = nil }), WantErr: "GCConfig.Node is required"},
		{Name: "no period", Config: without(func(c *GCConfig) { c.Period = 0 }), WantErr: "GCConfig.Period must be positive"},
		{Name: "no sources ready", Config: without(func(c *GCConfig) { c.SourcesReady = nil }), WantErr: "GCConfig.SourcesReady is required"},
		{Name: "a nil clock is the real one", Config: full},
	}, func(t *testing.T, g *GC) { ctortest.RealClock(t, g.cfg.Clock) })
}

// The loop collects once a period, not before the first; a failure is a
// node event, and the next period tries again.
func TestGCRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, rt, _ := newTestManager(t)
		rec := record.NewFakeRecorder(10)
		g, err := NewGC(GCConfig{Manager: m, Pods: removableAll(true), Recorder: rec, Node: &v1.ObjectReference{Kind: "Node", Name: "n"},
			Period: time.Minute, SourcesReady: func() bool { return true }})
		if err != nil {
			t.Fatal(err)
		}
		rt.InjectError("ListContainers", errors.New("runtime down"))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- g.Run(ctx) }()
		calls := func() int {
			synctest.Wait()
			return len(slices.DeleteFunc(rt.GetCalls(), func(c string) bool { return c != "ListContainers" }))
		}
		time.Sleep(time.Minute - time.Nanosecond)
		if n := calls(); n != 0 {
			t.Fatalf("%d collections before the first period", n)
		}
		time.Sleep(time.Nanosecond)
		if n := calls(); n != 1 {
			t.Fatalf("%d collections after a period, want 1", n)
		}
		select {
		case e := <-rec.Events:
			if want := "Warning " + EventContainerGCFailed; len(e) < len(want) || e[:len(want)] != want {
				t.Errorf("event %q, want %s", e, want)
			}
		default:
			t.Error("no event for the failed collection")
		}
		time.Sleep(time.Minute) // the fake runtime answers now
		if n := calls(); n != 2 {
			t.Fatalf("%d collections after two periods, want 2", n)
		}
		select {
		case e := <-rec.Events:
			t.Errorf("event %q for a collection that succeeded", e)
		default:
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func TestPodLogDirs(t *testing.T) {
	dir := t.TempDir()
	keep := PodLogDir(dir, "ns", "kept", "uid-kept")
	gone := PodLogDir(dir, "ns", "gone", "uid-gone")
	for _, d := range []string{keep, gone, filepath.Join(dir, "not_a-pod"), filepath.Join(dir, "a_b_c_d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if ns, name, uid, ok := ParsePodLogDir(filepath.Base(keep)); !ok || ns != "ns" || name != "kept" || uid != "uid-kept" {
		t.Errorf("ParsePodLogDir(%s) = %s %s %s %v", filepath.Base(keep), ns, name, uid, ok)
	}
	removed, err := RemoveOrphanLogDirs(dir, func(uid types.UID) bool { return uid == "uid-kept" })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []types.UID{"uid-gone"}) {
		t.Errorf("removed %v, want uid-gone", removed)
	}
	left, _ := os.ReadDir(dir)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if want := []string{"a_b_c_d", "not_a-pod", "ns_kept_uid-kept"}; !slices.Equal(names, want) {
		t.Errorf("left %v, want %v", names, want)
	}
	if removed, err := RemoveOrphanLogDirs(filepath.Join(dir, "missing"), func(types.UID) bool { return false }); err != nil || removed != nil {
		t.Errorf("a missing folder: %v %v", removed, err)
	}
}
