package volumes

import (
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"
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
	tests := []struct {
		name    string
		cfg     ManagerConfig
		wantErr string
	}{
		{"no pods directory", ManagerConfig{}, "ManagerConfig.PodsDir is required"},
		{"a nil clock is the real one", ManagerConfig{PodsDir: t.TempDir()}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := m.cfg.Clock.(clock.RealClock); !ok {
				t.Errorf("clock %T, want the real clock", m.cfg.Clock)
			}
		})
	}
}

func TestNewAPIGetter(t *testing.T) {
	tests := []struct {
		name    string
		cfg     APIGetterConfig
		wantErr string
	}{
		{"no client", APIGetterConfig{}, "APIGetterConfig.Client is required"},
		{"a nil clock is the real one", APIGetterConfig{Client: fake.NewSimpleClientset()}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := NewAPIGetter(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := g.clock.(clock.RealClock); !ok {
				t.Errorf("clock %T, want the real clock", g.clock)
			}
		})
	}
}
