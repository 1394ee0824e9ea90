package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// span is a line of test/fakes/otlpcollector's output.
type span struct {
	Service, Host, Scope, Name, TraceID, SpanID, ParentSpanID string
	Attributes                                                map[string]string
}

// TestTracing: with tracing set (KubeletTracing, GA), nodelet sends its
// spans over OTLP/gRPC to a collector (test/fakes/otlpcollector, checked
// against the OpenTelemetry SDK's own exporter): syncPod with the pod's
// attributes, the CRI calls it made as its children, syncTerminatingPod
// and syncTerminatedPod when the pod goes; resource service.name kubelet
// and host.name the node, scope upstream kubelet's.
func TestTracing(t *testing.T) {
	s := framework.RequireStack(t)
	bin, err := framework.BuildTool("./test/fakes/otlpcollector")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "spans.json")
	port := framework.FreePort(t)
	collector := exec.Command(bin, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--out", out)
	if err := collector.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = collector.Process.Kill(); _ = collector.Wait() })

	n := framework.NewNodelet(t, s, "e2e-tracing")
	n.AppendConfig(fmt.Sprintf("tracing:\n  endpoint: 127.0.0.1:%d\n  samplingRatePerMillion: 1000000\n", port))
	n.Start()
	n.WriteManifest("traced.yaml", podManifest("traced", "  terminationGracePeriodSeconds: 2\n", container("c", "sleep 3600")))
	pod := n.PodName("traced")
	waitRunning(t, s, pod, "c", 60*time.Second)
	n.RemoveManifest("traced.yaml")

	read := func() []span {
		f, err := os.Open(out)
		if err != nil {
			return nil
		}
		defer f.Close()
		var spans []span
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var sp span
			if json.Unmarshal(sc.Bytes(), &sp) == nil {
				spans = append(spans, sp)
			}
		}
		return spans
	}
	named := func(spans []span, name string) []span {
		var out []span
		for _, sp := range spans {
			if sp.Name == name && (sp.Attributes["k8s.pod.name"] == pod || sp.Attributes["k8s.pod.name"] == "") {
				out = append(out, sp)
			}
		}
		return out
	}
	var spans []span
	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, func() bool {
		spans = read()
		return len(named(spans, "syncPod")) > 0 && len(named(spans, "syncTerminatingPod")) > 0 && len(named(spans, "syncTerminatedPod")) > 0
	}, "syncPod, syncTerminatingPod and syncTerminatedPod spans of the pod")
	sync := named(spans, "syncPod")[0]
	if sync.Service != "kubelet" || sync.Host != "e2e-tracing" || sync.Scope != "k8s.io/kubernetes/pkg/kubelet" ||
		sync.Attributes["k8s.namespace.name"] != "default" || sync.Attributes["k8s.pod"] != "default/"+pod || sync.Attributes["k8s.pod.uid"] == "" {
		t.Errorf("syncPod span %+v", sync)
	}
	// The CRI calls of the pod's syncs are their children.
	children := map[string]bool{}
	for _, sp := range spans {
		for _, p := range named(spans, "syncPod") {
			if sp.ParentSpanID == p.SpanID && sp.TraceID == p.TraceID {
				children[sp.Name] = true
			}
		}
	}
	for _, want := range []string{"runtime.v1.RuntimeService/RunPodSandbox", "runtime.v1.RuntimeService/CreateContainer", "runtime.v1.RuntimeService/StartContainer"} {
		if !children[want] {
			t.Errorf("no %s span under syncPod; children: %v", want, children)
		}
	}
}
