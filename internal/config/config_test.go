package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFlagsOverrideFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /from/file
syncFrequency: 30s
fileCheckFrequency: 7s
maxPods: 50
podLogsDir: /file/logs
healthzPort: 12345
containerRuntimeEndpoint: unix:///file.sock
`), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := Parse([]string{"--config", path, "--pod-manifest-path", "/from/flag", "--max-pods", "7", "--hostname-override", "MyNode"})
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	checks := []struct {
		what      string
		got, want any
	}{
		{"staticPodPath (flag wins)", c.StaticPodPath, "/from/flag"},
		{"maxPods (flag wins)", c.MaxPods, int32(7)},
		{"syncFrequency (file)", c.SyncFrequency.Duration, 30 * time.Second},
		{"fileCheckFrequency (file)", c.FileCheckFrequency.Duration, 7 * time.Second},
		{"podLogsDir (file)", c.PodLogsDir, "/file/logs"},
		{"healthzPort (file)", *c.HealthzPort, int32(12345)},
		{"healthzBindAddress (default)", c.HealthzBindAddress, "127.0.0.1"},
		{"runtime endpoint (file)", c.ContainerRuntimeEndpoint, "unix:///file.sock"},
		{"image endpoint (defaults to runtime)", c.ImageServiceEndpoint, "unix:///file.sock"},
		{"node name (lower-cased)", o.NodeName, "mynode"},
		{"root dir (default)", o.RootDir, "/var/lib/kubelet"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.what, ch.got, ch.want)
		}
	}
}

func TestDefaultsWithoutFile(t *testing.T) {
	o, err := Parse([]string{"--hostname-override", "n"})
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if c.SyncFrequency.Duration != time.Minute || c.FileCheckFrequency.Duration != 20*time.Second || c.MaxPods != 110 ||
		*c.HealthzPort != 10248 || c.PodLogsDir != "/var/log/pods" || c.ContainerRuntimeEndpoint != DefaultContainerRuntimeEndpoint {
		t.Errorf("defaults: %+v", c)
	}
}

func TestBadConfigFiles(t *testing.T) {
	dir := t.TempDir()
	for name, tt := range map[string]struct{ content, want string }{
		"wrong kind":     {"apiVersion: v1\nkind: Pod\n", "want kind KubeletConfiguration"},
		"bad duration":   {"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsyncFrequency: soon\n", "kubelet config file"},
		"invalid values": {"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: -1\npodLogsDir: relative\n", "maxPods must not be negative"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		_ = os.WriteFile(path, []byte(tt.content), 0o644)
		_, err := Parse([]string{"--config", path})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", name, err, tt.want)
		}
	}
	// Unknown fields are tolerated (with a warning), as upstream.
	path := filepath.Join(dir, "unknown")
	_ = os.WriteFile(path, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nnotAField: 1\nmaxPods: 9\n"), 0o644)
	o, err := Parse([]string{"--config", path})
	if err != nil || o.Config.MaxPods != 9 {
		t.Errorf("unknown field: %v, maxPods %v", err, o)
	}
}
