package volumes

import (
	"context"
	"os"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/ctortest"
)

// newManager is New for tests: it fails the test on an error.
func newManager(t *testing.T, cfg ManagerConfig) *Manager {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// newAPIGetter is NewAPIGetter for tests: it fails the test on an error.
func newAPIGetter(t *testing.T, cfg APIGetterConfig) *APIGetter {
	t.Helper()
	g, err := NewAPIGetter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestNew(t *testing.T) {
	ctortest.Run(t, New, []ctortest.Case[ManagerConfig]{
		{Name: "no pods directory", Config: ManagerConfig{}, WantErr: "ManagerConfig.PodsDir is required"},
		{Name: "a pods directory", Config: ManagerConfig{PodsDir: t.TempDir()}},
	}, func(t *testing.T, m *Manager) {
		if m.podsDir == "" {
			t.Error("no pods directory")
		}
	})
}

func TestNewAPIGetter(t *testing.T) {
	ctortest.Run(t, NewAPIGetter, []ctortest.Case[APIGetterConfig]{
		{Name: "no client", Config: APIGetterConfig{}, WantErr: "APIGetterConfig.Client is required"},
		{Name: "a nil clock is the real one", Config: APIGetterConfig{Client: fake.NewSimpleClientset()}},
	}, func(t *testing.T, g *APIGetter) {
		ctortest.RealClock(t, g.clock)
	})
}

// TestStates: each volume's last set-up outcome is kept; a failure keeps
// the last success's path; volumes after the failing one are not reached;
// Teardown forgets them.
func TestStates(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	m := newManager(t, ManagerConfig{PodsDir: t.TempDir(), Clock: clk})
	hostDir := t.TempDir()
	dirType := v1.HostPathDirectory
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}, Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir, Type: &dirType}}},
		{Name: "later", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}}}
	if _, err := m.Setup(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	first := clk.Now()
	if st := m.States("u1"); len(st) != 3 || st["host"].Path != hostDir || !st["host"].SetUpAt.Equal(first) || st["scratch"].Err != "" {
		t.Fatalf("after a good set-up: %+v", st)
	}
	if err := os.Remove(hostDir); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(first.Add(time.Minute))
	if _, err := m.Setup(context.Background(), pod); err == nil {
		t.Fatal("set-up of a missing hostPath directory succeeded")
	}
	st := m.States("u1")
	if h := st["host"]; h.Err == "" || !h.ErrAt.Equal(clk.Now()) || h.Path != hostDir || !h.SetUpAt.Equal(first) {
		t.Errorf("failed hostPath: %+v", h)
	}
	if l := st["later"]; !l.SetUpAt.Equal(first) || l.Err != "" {
		t.Errorf("the volume after the failing one: %+v", l)
	}
	if err := m.Teardown("u1"); err != nil {
		t.Fatal(err)
	}
	if st := m.States("u1"); len(st) != 0 {
		t.Errorf("after Teardown: %+v", st)
	}
}
