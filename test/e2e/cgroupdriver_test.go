package e2e

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// TestCgroupV1AndRuntimeDriver: with failCgroupV1 left at its default
// (true, as upstream) nodelet refuses this host's cgroup v1 with upstream's
// message; --fail-cgroupv1=false runs it. The stack's containerd 1.6 has no
// RuntimeConfig: nodelet keeps the configured cgroupDriver with upstream's
// log line and reports kubelet_cri_losing_support{version="1.38.0"} 1. On a
// cgroup v2 host the default starts.
func TestCgroupV1AndRuntimeDriver(t *testing.T) {
	s := framework.RequireStack(t)
	n := framework.NewNodelet(t, s, "e2e-cgroupv1")
	cfg, err := os.ReadFile(n.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "\nfailCgroupV1: false\n") {
		t.Fatalf("the framework's configuration no longer sets failCgroupV1: false:\n%s", cfg)
	}
	if err := os.WriteFile(n.ConfigFile, []byte(strings.Replace(string(cfg), "\nfailCgroupV1: false\n", "\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	n.AppendConfig("authentication:\n  anonymous:\n    enabled: true\nauthorization:\n  mode: AlwaysAllow\n")
	if cgroupV1() {
		n.Start()
		framework.Eventually(t, 30*time.Second, 200*time.Millisecond, n.Exited, "nodelet refuses cgroup v1 by default")
		for _, want := range []string{"kubelet is configured to not run on a host using cgroup v1", "failCgroupV1"} {
			if !strings.Contains(n.Log(), want) {
				t.Errorf("nodelet's log lacks %q:\n%s", want, n.Log())
			}
		}
		n.ExtraArgs = append(n.ExtraArgs, "--fail-cgroupv1=false")
	}
	n.Start()
	n.WriteManifest("v1.yaml", podManifest("v1", "", container("c", "sleep 3600")))
	waitRunning(t, s, n.PodName("v1"), "c", 60*time.Second)

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	// The pod can run before the kubelet API listens (its serving
	// certificate is generated at start).
	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", n.APIPort)
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}, "the kubelet API listening")
	code, metrics := httpGet(t, client, url)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	log := n.Log()
	switch {
	case strings.Contains(log, "Using cgroup driver setting received from the CRI runtime"):
		if strings.Contains(metrics, `kubelet_cri_losing_support{version="1.38.0"} 1`) {
			t.Error("a runtime with RuntimeConfig, yet kubelet_cri_losing_support is 1")
		}
	case strings.Contains(log, "Falling back to using cgroupDriver from kubelet config"):
		if !strings.Contains(metrics, `kubelet_cri_losing_support{version="1.38.0"} 1`) {
			t.Errorf("a runtime without RuntimeConfig, but no kubelet_cri_losing_support{version=\"1.38.0\"} 1 in /metrics:\n%s", grepLines(metrics, "kubelet_cri"))
		}
	default:
		t.Errorf("nodelet's log says neither where its cgroup driver came from:\n%s", grepLines(log, "cgroup"))
	}
}
