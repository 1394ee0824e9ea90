package config

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
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

// TestUpstreamDropInSpec: the two drop-ins of upstream's node e2e
// "KubeletConfigDropInDir should merge kubelet configs correctly", as they
// are, are accepted and merged as that spec expects (a map of lists
// replaced per key, lists of structs replaced, a struct's fields merged).
func TestUpstreamDropInSpec(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("10-kubelet.conf", `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
port: 10255
readOnlyPort: 10257
clusterDNS:
- 192.168.1.10
systemReserved:
  memory: 1Gi
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: "5m"
    cacheUnauthorizedTTL: "30s"
staticPodURLHeader:
  kubelet-api-support:
  - "Authorization: 234APSDFA"
  - "X-Custom-Header: 123"
  custom-static-pod:
  - "Authorization: 223EWRWER"
  - "X-Custom-Header: 456"
shutdownGracePeriodByPodPriority:
  - priority: 1
    shutdownGracePeriodSeconds: 60
  - priority: 2
    shutdownGracePeriodSeconds: 45
  - priority: 3
    shutdownGracePeriodSeconds: 30
featureGates:
  PodAndContainerStatsFromCRI: true`)
	write("20-kubelet.conf", `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
clusterDNS:
- 192.168.1.1
- 192.168.1.5
- 192.168.1.8
port: 8080
cpuManagerReconcilePeriod: 1s
systemReserved:
  memory: 2Gi
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: "6m"
    cacheUnauthorizedTTL: "40s"
staticPodURLHeader:
  kubelet-api-support:
  - "Authorization: 8945AFSG1"
  - "X-Custom-Header: 987"
  custom-static-pod:
  - "Authorization: 223EWRWER"
  - "X-Custom-Header: 345"
shutdownGracePeriodByPodPriority:
  - priority: 1
    shutdownGracePeriodSeconds: 19
  - priority: 2
    shutdownGracePeriodSeconds: 41
  - priority: 6
    shutdownGracePeriodSeconds: 30
featureGates:
  KubeletServiceAccountTokenForCredentialProviders: true
  PodAndContainerStatsFromCRI: false
  DynamicResourceAllocation: true`)
	o, err := Parse(context.Background(), []string{"--hostname-override", "n", "--config-dir", dir})
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if c.Port != 8080 || c.ReadOnlyPort != 10257 || strings.Join(c.ClusterDNS, ",") != "192.168.1.1,192.168.1.5,192.168.1.8" ||
		c.SystemReserved["memory"] != "2Gi" || c.Authorization.Webhook.CacheAuthorizedTTL.Duration != 6*time.Minute {
		t.Errorf("merged: port %d, readOnlyPort %d, clusterDNS %v, systemReserved %v, authorization %+v", c.Port, c.ReadOnlyPort, c.ClusterDNS, c.SystemReserved, c.Authorization)
	}
	want := map[string][]string{
		"kubelet-api-support": {"Authorization: 8945AFSG1", "X-Custom-Header: 987"},
		"custom-static-pod":   {"Authorization: 223EWRWER", "X-Custom-Header: 345"},
	}
	if !reflect.DeepEqual(c.StaticPodURLHeader, want) {
		t.Errorf("staticPodURLHeader %v, want %v", c.StaticPodURLHeader, want)
	}
	if g := c.ShutdownGracePeriodByPodPriority; len(g) != 3 || g[2].Priority != 6 || g[0].ShutdownGracePeriodSeconds != 19 {
		t.Errorf("shutdownGracePeriodByPodPriority %+v", g)
	}
	if f := c.FeatureGates; f["PodAndContainerStatsFromCRI"] || !f["DynamicResourceAllocation"] || !f["KubeletServiceAccountTokenForCredentialProviders"] {
		t.Errorf("featureGates %v", f)
	}
}

// TestLogEffective: upstream's startup dump of the effective
// configuration, which its node e2e "should dump the effective
// KubeletConfiguration to the kubelet log at startup" greps for, the
// headers' values masked.
func TestLogEffective(t *testing.T) {
	o, err := Parse(context.Background(), []string{"--hostname-override", "n", "--event-burst", "101",
		"--manifest-url", "http://127.0.0.1/pods", "--manifest-url-header", "Authorization:secret-token"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	ctx := klog.NewContext(context.Background(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf))))
	LogEffective(ctx, &o.Config)
	out := buf.String()
	for _, want := range []string{"Effective KubeletConfiguration", "kind: KubeletConfiguration", "eventBurst: 101", "<masked>"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret-token") {
		t.Errorf("the log shows staticPodURLHeader's value")
	}
	if o.Config.StaticPodURLHeader["Authorization"][0] != "secret-token" {
		t.Errorf("LogEffective changed the configuration")
	}
}
