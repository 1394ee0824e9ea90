package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestEmptyDirSizeLimit(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	rec := record.NewFakeRecorder(10)
	m := newManager(t, ManagerConfig{PodsDir: t.TempDir(), Recorder: rec, Clock: clk})
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "p", "ns", "uid-usage"
	pod.Spec.Volumes = []v1.Volume{
		{Name: "small", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("64Ki"))}}},
		{Name: "unlimited", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}
	paths, err := m.Setup(context.Background(), pod)
	must(t, err)
	if u := m.EmptyDirUsage(pod.UID); len(u) != 1 || u[0].Volume != "small" || !u[0].MeasuredAt.IsZero() || u[0].Exceeded() {
		t.Fatalf("usage before a measurement: %+v", u)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	tick := func() {
		t.Helper()
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		before := m.EmptyDirUsage(pod.UID)[0].MeasuredAt
		clk.Step(10 * time.Second)
		for m.EmptyDirUsage(pod.UID)[0].MeasuredAt.Equal(before) {
			time.Sleep(time.Millisecond)
		}
	}

	must(t, os.WriteFile(filepath.Join(paths["small"], "a"), make([]byte, 32<<10), 0o644))
	tick()
	if u := m.EmptyDirUsage(pod.UID)[0]; u.Exceeded() || u.Bytes < 32<<10 {
		t.Errorf("under the limit: %+v", u)
	}
	must(t, os.WriteFile(filepath.Join(paths["small"], "b"), make([]byte, 64<<10), 0o644))
	tick()
	if u := m.EmptyDirUsage(pod.UID)[0]; !u.Exceeded() || u.Bytes < 96<<10 {
		t.Errorf("over the limit: %+v", u)
	}
	select {
	case e := <-rec.Events:
		if want := `Warning EmptyDirSizeLimitExceeded Usage of EmptyDir volume "small" exceeds the limit "64Ki".`; e != want {
			t.Errorf("event %q, want %q", e, want)
		}
	default:
		t.Fatal("no event")
	}
	// Still over: no second event.
	tick()
	select {
	case e := <-rec.Events:
		t.Errorf("a second event while still over: %q", e)
	default:
	}
	// Back under, then over again: reported again.
	must(t, os.Remove(filepath.Join(paths["small"], "b")))
	tick()
	must(t, os.WriteFile(filepath.Join(paths["small"], "c"), make([]byte, 64<<10), 0o644))
	tick()
	select {
	case <-rec.Events:
	default:
		t.Error("no event after going over the limit again")
	}
	must(t, m.Teardown(pod.UID))
	if u := m.EmptyDirUsage(pod.UID); len(u) != 0 {
		t.Errorf("usage of a torn down pod: %+v", u)
	}
}

func TestAPIGetterCache(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	g := newAPIGetter(t, APIGetterConfig{Client: fake.NewSimpleClientset(), Clock: clk, TTL: 30 * time.Second})
	var calls int
	var next func() (any, error)
	fetch := func() (any, error) { calls++; return next() }
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "cm")

	// A missing object is looked up again on every call: never cached.
	next = func() (any, error) { return nil, notFound }
	for i := 0; i < 2; i++ {
		if _, err := g.get("k", fetch); !apierrors.IsNotFound(err) {
			t.Fatalf("want NotFound, got %v", err)
		}
	}
	if calls != 2 {
		t.Errorf("NotFound served from the cache (%d calls)", calls)
	}
	// Found: cached for the TTL.
	next = func() (any, error) { return "v1", nil }
	for i := 0; i < 2; i++ {
		if v, err := g.get("k", fetch); err != nil || v != "v1" {
			t.Fatalf("got %v %v", v, err)
		}
	}
	if calls != 3 {
		t.Errorf("%d calls, want 3", calls)
	}
	// After the TTL, an unreachable API server: the last object is served.
	clk.Step(31 * time.Second)
	next = func() (any, error) { return nil, errors.New("connection refused") }
	if v, err := g.get("k", fetch); err != nil || v != "v1" {
		t.Errorf("during an outage: %v %v, want the last object", v, err)
	}
	// The object deleted: NotFound, and forgotten.
	next = func() (any, error) { return nil, notFound }
	if _, err := g.get("k", fetch); !apierrors.IsNotFound(err) {
		t.Errorf("deleted: %v", err)
	}
	next = func() (any, error) { return nil, errors.New("connection refused") }
	if _, err := g.get("k", fetch); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("outage after deletion: %v, want the error", err)
	}
}

func TestIsMountPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := filepath.Join(t.TempDir(), "v")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if m, err := isMountPoint(dir); err != nil || m {
		t.Fatalf("plain directory: mounted=%v err=%v", m, err)
	}
	mounted, err := ensureTmpfs(dir, "mode=0755,size=1m")
	if err != nil || !mounted {
		t.Fatalf("ensureTmpfs: %v %v", mounted, err)
	}
	defer unmountUnder(dir)
	if m, err := isMountPoint(dir); err != nil || !m {
		t.Fatalf("tmpfs: mounted=%v err=%v", m, err)
	}
	if again, err := ensureTmpfs(dir, "mode=0755,size=1m"); err != nil || again {
		t.Fatalf("second ensureTmpfs mounted again: %v %v", again, err)
	}
}
