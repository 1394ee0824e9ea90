package nodestatus

import (
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	critest "k8s.io/cri-api/pkg/apis/testing"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodelet/nodelet/internal/ctortest"
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
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no client", Config: without(func(c *Config) { c.Client = nil }), WantErr: "Config.Client is required"},
		{Name: "no node name", Config: without(func(c *Config) { c.NodeName = "" }), WantErr: "Config.NodeName is required"},
		{Name: "no kubelet configuration", Config: without(func(c *Config) { c.Kubelet = nil }), WantErr: "Config.Kubelet is required"},
		{Name: "no runtime", Config: without(func(c *Config) { c.Runtime = nil }), WantErr: "Config.Runtime is required"},
		{Name: "no image service", Config: without(func(c *Config) { c.Images = nil }), WantErr: "Config.Images is required"},
		{Name: "no recorder", Config: without(func(c *Config) { c.Recorder = nil }), WantErr: "Config.Recorder is required"},
		{Name: "a nil clock is the real one", Config: full},
	}, func(t *testing.T, m *Manager) {
		ctortest.RealClock(t, m.cfg.Clock)
	})
}
