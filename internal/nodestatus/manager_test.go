package nodestatus

import (
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	critest "k8s.io/cri-api/pkg/apis/testing"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
)

func TestNew(t *testing.T) {
	full := Config{
		Client:   fake.NewClientset(),
		NodeName: "n1",
		Kubelet:  &kubeletv1beta1.KubeletConfiguration{},
		Runtime:  critest.NewFakeRuntimeService(),
		Images:   critest.NewFakeImageService(),
		Recorder: record.NewFakeRecorder(10),
	}
	without := func(f func(*Config)) Config {
		c := full
		f(&c)
		return c
	}
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"no client", without(func(c *Config) { c.Client = nil }), "Config.Client is required"},
		{"no node name", without(func(c *Config) { c.NodeName = "" }), "Config.NodeName is required"},
		{"no kubelet configuration", without(func(c *Config) { c.Kubelet = nil }), "Config.Kubelet is required"},
		{"no runtime", without(func(c *Config) { c.Runtime = nil }), "Config.Runtime is required"},
		{"no image service", without(func(c *Config) { c.Images = nil }), "Config.Images is required"},
		{"no recorder", without(func(c *Config) { c.Recorder = nil }), "Config.Recorder is required"},
		{"a nil clock is the real one", full, ""},
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
