package kuberuntime

import (
	"strings"
	"testing"

	critest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/clock"
)

func TestNew(t *testing.T) {
	rt := critest.NewFakeRuntimeService()
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"no runtime", Config{Images: presentImages{}}, "Config.Runtime is required"},
		{"no images", Config{Runtime: rt}, "Config.Images is required"},
		{"a nil clock is the real one", Config{Runtime: rt, Images: presentImages{}}, ""},
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
			if _, ok := m.clock.(clock.RealClock); !ok {
				t.Errorf("clock %T, want the real clock", m.clock)
			}
		})
	}
}
