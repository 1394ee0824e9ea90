package imagegc

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/ctortest"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func rec(id string, size int64, first, last time.Time) *Record {
	return &Record{ID: id, Size: size, FirstDetected: first, LastUsed: last}
}

func ids(rs []Record) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return strings.Join(out, ",")
}

func TestCandidates(t *testing.T) {
	records := map[string]*Record{
		"recent": rec("recent", 1, t0, t0.Add(2*time.Hour)),
		"old":    rec("old", 1, t0, t0.Add(time.Hour)),
		"never":  rec("never", 1, t0.Add(time.Minute), time.Time{}),
		"never2": rec("never2", 1, t0, time.Time{}),
		"used":   rec("used", 1, t0, t0),
		"pinned": {ID: "pinned", Pinned: true},
	}
	got := Candidates(records, map[string]bool{"used": true})
	if s := ids(got); s != "never2,never,old,recent" {
		t.Errorf("order %s", s)
	}
}

func TestToFree(t *testing.T) {
	for _, tc := range []struct {
		name                string
		capacity, available int64
		high, low           int
		want                int64
	}{
		{"below the high threshold", 100, 20, 85, 80, 0},
		{"at it: free down to the low one", 100, 15, 85, 80, 5},
		{"far above", 1000, 0, 85, 80, 200},
		{"no capacity", 0, 0, 85, 80, 0},
		{"available above capacity", 100, 200, 85, 80, 0},
	} {
		if got := ToFree(tc.capacity, tc.available, tc.high, tc.low); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestOld(t *testing.T) {
	cands := []Record{*rec("a", 1, t0, t0), *rec("b", 1, t0, t0.Add(90*time.Minute))}
	now := t0.Add(2 * time.Hour)
	if got := ids(Old(cands, now, t0, time.Hour)); got != "a" {
		t.Errorf("old %q", got)
	}
	if got := Old(cands, now, now.Add(-30*time.Minute), time.Hour); got != nil {
		t.Errorf("old before the collector ran maxAge: %v", got)
	}
	if got := Old(cands, now, t0, 0); got != nil {
		t.Errorf("old without a max age: %v", got)
	}
}

func TestForSpace(t *testing.T) {
	now := t0.Add(time.Hour)
	cands := []Record{
		*rec("a", 10, t0, t0), *rec("young", 10, now.Add(-time.Minute), time.Time{}), *rec("b", 10, t0, t0.Add(time.Minute)),
		*rec("c", 10, t0, t0.Add(2*time.Minute)), *rec("now", 10, t0, now),
	}
	for _, tc := range []struct {
		bytes int64
		want  string
	}{{5, "a"}, {10, "a"}, {11, "a,b"}, {100, "a,b,c"}, {-1, "a,b,c"}} {
		if got := ids(ForSpace(cands, tc.bytes, now, 2*time.Minute)); got != tc.want {
			t.Errorf("%d bytes: %s, want %s", tc.bytes, got, tc.want)
		}
	}
}

type fakeImages struct {
	internalapi.ImageManagerService
	images  []*runtimeapi.Image
	removed []string
}

func (f *fakeImages) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return f.images, nil
}

func (f *fakeImages) RemoveImage(_ context.Context, spec *runtimeapi.ImageSpec) error {
	f.removed = append(f.removed, spec.Image)
	f.images = slices.DeleteFunc(f.images, func(i *runtimeapi.Image) bool { return i.Id == spec.Image })
	return nil
}

type fakeRuntime struct {
	internalapi.RuntimeService
	containers []*runtimeapi.Container
	// mounts are the images each container mounts (image volumes), by ID.
	mounts map[string][]string
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	st := &runtimeapi.ContainerStatus{Id: id}
	for _, ref := range f.mounts[id] {
		st.Mounts = append(st.Mounts, &runtimeapi.Mount{ContainerPath: "/v", Image: &runtimeapi.ImageSpec{Image: ref}})
	}
	return &runtimeapi.ContainerStatusResponse{Status: st}, nil
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return f.containers, nil
}

func (f *fakeRuntime) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Info: map[string]string{"config": `{"sandboxImage":"registry.k8s.io/pause:3.10"}`}}, nil
}

func image(id string, size uint64, tags ...string) *runtimeapi.Image {
	return &runtimeapi.Image{Id: id, Size: size, RepoTags: tags}
}

func TestNew(t *testing.T) {
	ok := Config{Images: &fakeImages{}, Runtime: &fakeRuntime{}, FsStats: func(context.Context) (int64, int64, error) { return 1, 1, nil },
		Recorder: record.NewFakeRecorder(1), HighThresholdPercent: 85, LowThresholdPercent: 80}
	without := func(f func(*Config)) Config { c := ok; f(&c); return c }
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no images", Config: without(func(c *Config) { c.Images = nil }), WantErr: "Config.Images is required"},
		{Name: "no runtime", Config: without(func(c *Config) { c.Runtime = nil }), WantErr: "Config.Runtime is required"},
		{Name: "no stats", Config: without(func(c *Config) { c.FsStats = nil }), WantErr: "Config.FsStats is required"},
		{Name: "no recorder", Config: without(func(c *Config) { c.Recorder = nil }), WantErr: "Config.Recorder is required"},
		{Name: "low above high", Config: without(func(c *Config) { c.LowThresholdPercent = 90 }), WantErr: "above the high threshold"},
		{Name: "defaults", Config: ok},
	}, func(t *testing.T, m *Manager) {
		ctortest.RealClock(t, m.cfg.Clock)
		if m.cfg.Period != DefaultPeriod {
			t.Errorf("period %v", m.cfg.Period)
		}
	})
}

// A collection over the high threshold removes the least recently used
// unused images down to the low threshold, never one in use (by a running
// or an exited container, by ID or by tag), the sandbox image or one just
// pulled; the records survive a restart.
func TestGarbageCollect(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "image-gc.json")
	clk := testingclock.NewFakeClock(t0)
	imgs := &fakeImages{images: []*runtimeapi.Image{
		image("sha256:a", 30), image("sha256:b", 30), image("sha256:c", 30),
		image("sha256:running", 30, "busybox:1"), image("sha256:exited", 30),
		image("sha256:pause", 30, "registry.k8s.io/pause:3.10"),
	}}
	rt := &fakeRuntime{containers: []*runtimeapi.Container{
		{Image: &runtimeapi.ImageSpec{Image: "busybox:1"}, State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		{ImageRef: "sha256:exited", State: runtimeapi.ContainerState_CONTAINER_EXITED},
	}}
	available := int64(100)
	events := record.NewFakeRecorder(10)
	cfg := Config{
		Images: imgs, Runtime: rt, FsStats: func(context.Context) (int64, int64, error) { return 1000, available, nil },
		HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute, StateFile: state,
		Recorder: events, Node: &v1.ObjectReference{Kind: "Node", Name: "n"}, Clock: clk,
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Every image is first seen now: too young to go.
	if err := m.GarbageCollect(context.Background()); err == nil || !strings.Contains(err.Error(), "Insufficient free disk space") {
		t.Fatalf("err %v", err)
	}
	if len(imgs.removed) != 0 {
		t.Fatalf("removed young images %v", imgs.removed)
	}
	if ev := <-events.Events; !strings.HasPrefix(ev, "Warning FreeDiskSpaceFailed Insufficient free disk space on the node's image filesystem (90% of 1000 B used)") {
		t.Errorf("event %q", ev)
	}
	// b is used later, then its container goes.
	clk.Step(time.Minute)
	rt.containers = append(rt.containers, &runtimeapi.Container{ImageRef: "sha256:b"})
	if err := m.GarbageCollect(context.Background()); err == nil {
		t.Fatal("freed young images")
	}
	rt.containers = rt.containers[:2]
	<-events.Events

	// A restart: the records come back from the state file.
	m, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(5 * time.Minute)
	available = 140 // 86% used: free 60 bytes, two images
	if err := m.GarbageCollect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(imgs.removed, ","); got != "sha256:a,sha256:c" {
		t.Errorf("removed %s, want the least recently used a and c (b was used after)", got)
	}
	// Reclaim takes every unused image left.
	if err := m.Reclaim(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(imgs.removed, ","); got != "sha256:a,sha256:c,sha256:b" {
		t.Errorf("removed %s after the reclaim", got)
	}
	if _, err := os.Stat(state); err != nil {
		t.Error(err)
	}
}

// An image a container mounts (an image volume) is in use: it stays.
func TestImageVolumesInUse(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	imgs := &fakeImages{images: []*runtimeapi.Image{
		image("sha256:app", 30, "busybox:1"), image("sha256:vol", 30, "example.test/artifact:1"), image("sha256:old", 30),
	}}
	rt := &fakeRuntime{
		containers: []*runtimeapi.Container{{Id: "c1", ImageRef: "sha256:app", State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
		mounts:     map[string][]string{"c1": {"sha256:vol"}},
	}
	var left []string
	var leftAt time.Time
	m, err := New(Config{
		Images: imgs, Runtime: rt, FsStats: func(context.Context) (int64, int64, error) { return 1000, 900, nil },
		HighThresholdPercent: 85, LowThresholdPercent: 80, StateFile: filepath.Join(t.TempDir(), "image-gc.json"), Clock: clk,
		Recorder: record.NewFakeRecorder(10), Node: &v1.ObjectReference{Kind: "Node", Name: "n"},
		AfterCollect: func(_ context.Context, images []string, began time.Time) { left, leftAt = images, began },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Reclaim(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(imgs.removed, ","); got != "sha256:old" {
		t.Errorf("removed %s, want only sha256:old (sha256:vol is mounted)", got)
	}
	// The images left, for the image pull records.
	if got := strings.Join(left, ","); got != "sha256:app,sha256:vol" || !leftAt.Equal(t0) {
		t.Errorf("AfterCollect got %s at %v", got, leftAt)
	}
}

// imageMaximumGCAge: an unused image not used for longer goes, once the
// collector has run that long, without disk pressure.
func TestGarbageCollectMaxAge(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	imgs := &fakeImages{images: []*runtimeapi.Image{image("sha256:a", 30), image("sha256:used", 30)}}
	rt := &fakeRuntime{containers: []*runtimeapi.Container{{ImageRef: "sha256:used"}}}
	m, err := New(Config{
		Images: imgs, Runtime: rt, FsStats: func(context.Context) (int64, int64, error) { return 1000, 900, nil },
		HighThresholdPercent: 85, LowThresholdPercent: 80, MaxAge: time.Hour, Recorder: record.NewFakeRecorder(10), Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.GarbageCollect(context.Background()); err != nil || len(imgs.removed) != 0 {
		t.Fatalf("removed %v, err %v", imgs.removed, err)
	}
	clk.Step(61 * time.Minute)
	if err := m.GarbageCollect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(imgs.removed, ","); got != "sha256:a" {
		t.Errorf("removed %s", got)
	}
}

func TestFormatSize(t *testing.T) {
	for b, want := range map[int64]string{512: "512 B", 2048: "2.0 KiB", 3 << 30: "3.0 GiB", 5 << 40: "5.0 TiB", 5 << 50: "5120.0 TiB"} {
		if got := formatSize(b); got != want {
			t.Errorf("%d: %q, want %q", b, got, want)
		}
	}
}
