package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --config-dir as upstream: defaults, then --config, then the .conf
// drop-ins in lexical order of their paths (subfolders included, other
// files skipped), merged field by field; flags win over all.
func TestConfigDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	head := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	write("config.yaml", head+"maxPods: 50\nreadOnlyPort: 10255\nevictionHard: {memory.available: 100Mi}\nclusterDNS: [10.0.0.10]\n")
	write("drop/10-pods.conf", head+"maxPods: 60\nevictionHard: {nodefs.available: 5%}\n")
	write("drop/20-dns.conf", head+"clusterDNS: [10.0.0.53]\n")
	write("drop/15/port.conf", head+"readOnlyPort: 0\nmaxPods: 55\n") // "drop/15/..." sorts before "drop/20-..."
	write("drop/30-ignored.yaml", head+"maxPods: 1\n")
	write("drop/40-log.conf", head+"enableSystemLogQuery: true\nserializeImagePulls: false\n")

	o, err := Parse(context.Background(), []string{"--config", filepath.Join(dir, "config.yaml"), "--config-dir", filepath.Join(dir, "drop")})
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if c.MaxPods != 55 {
		t.Errorf("maxPods %d, want 55 (drop/15/port.conf after drop/10-pods.conf)", c.MaxPods)
	}
	if c.ReadOnlyPort != 0 {
		t.Errorf("readOnlyPort %d, want 0 from a drop-in", c.ReadOnlyPort)
	}
	// A map is merged key by key (JSON merge patch), as upstream.
	if got := c.EvictionHard; got["memory.available"] != "100Mi" || got["nodefs.available"] != "5%" {
		t.Errorf("evictionHard %v, want both the file's and the drop-in's keys", got)
	}
	// A list is replaced.
	if len(c.ClusterDNS) != 1 || c.ClusterDNS[0] != "10.0.0.53" {
		t.Errorf("clusterDNS %v", c.ClusterDNS)
	}
	if c.EnableSystemLogQuery == nil || !*c.EnableSystemLogQuery || *c.SerializeImagePulls {
		t.Errorf("enableSystemLogQuery %v, serializeImagePulls %v", c.EnableSystemLogQuery, *c.SerializeImagePulls)
	}
	// Defaults still apply to what nobody set.
	if c.SyncFrequency.Duration == 0 || c.HealthzPort == nil {
		t.Errorf("defaults lost: syncFrequency %v", c.SyncFrequency)
	}

	o, err = Parse(context.Background(), []string{"--config-dir", filepath.Join(dir, "drop"), "--max-pods", "70"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Config.MaxPods != 70 || len(o.Config.ClusterDNS) != 1 {
		t.Errorf("without --config, with a flag: maxPods %d (want the flag's 70), clusterDNS %v", o.Config.MaxPods, o.Config.ClusterDNS)
	}

	for name, tt := range map[string]struct{ content, want string }{
		"no kind":    {"maxPods: 3\n", "no apiVersion/kind"},
		"wrong kind": {"apiVersion: v1\nkind: Pod\n", "unknown apiVersion/kind"},
		"not yaml":   {head + "maxPods: [\n", "failed to load kubelet dropin file"},
	} {
		bad := filepath.Join(t.TempDir(), "99.conf")
		if err := os.WriteFile(bad, []byte(tt.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(context.Background(), []string{"--config-dir", filepath.Dir(bad)}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", name, err, tt.want)
		}
	}
	if _, err := Parse(context.Background(), []string{"--config-dir", filepath.Join(dir, "missing")}); err == nil || !strings.Contains(err.Error(), "failed to walk through kubelet dropin directory") {
		t.Errorf("a missing --config-dir: %v", err)
	}
}
