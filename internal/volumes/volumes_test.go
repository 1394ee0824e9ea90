package volumes

import (
	"testing"

	"k8s.io/client-go/kubernetes/fake"

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
