package stats

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	remote "k8s.io/cri-client/pkg"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/machine"
)

// TestIntegrationContainerd runs Summary and the collector against the
// runtime at $CONTAINER_RUNTIME_ENDPOINT (the private containerd of the
// stack), if there is one.
func TestIntegrationContainerd(t *testing.T) {
	// In CI (hack/test.sh exports the stack's .stack/env) the runtime is
	// required: not reaching it fails the test.
	skipf := t.Skipf
	if os.Getenv("CI") == "true" {
		skipf = t.Fatalf
	}
	ep := os.Getenv("CONTAINER_RUNTIME_ENDPOINT")
	sock, ok := strings.CutPrefix(ep, "unix://")
	if !ok {
		skipf("CONTAINER_RUNTIME_ENDPOINT %q is not a unix socket", ep)
	}
	if _, err := os.Stat(sock); err != nil {
		skipf("no runtime socket: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(ep).
		WithConnectionTimeout(10 * time.Second).WithTracerProvider(nil).Build(ctx)
	if err != nil {
		skipf("cannot connect to %s: %v", ep, err)
	}
	is, err := remote.NewRemoteImageServiceBuilder().WithEndpoint(ep).
		WithConnectionTimeout(10 * time.Second).WithTracerProvider(nil).Build(ctx)
	if err != nil {
		skipf("cannot connect to %s: %v", ep, err)
	}
	if _, err := rs.Version(ctx, "v1"); err != nil {
		skipf("runtime does not answer: %v", err)
	}

	facts, err := machine.Read(machine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, Config{
		NodeName:   "integration",
		RootDir:    t.TempDir(),
		PodLogsDir: t.TempDir(),
		Runtime:    rs,
		Images:     is,
		Machine:    facts,
	})
	s, err := p.Summary(ctx)
	if err != nil {
		t.Fatalf("Summary: %v", err)
	}
	if s.Node.CPU == nil || s.Node.CPU.UsageNanoCores == nil {
		t.Errorf("node cpu without usageNanoCores: %+v", s.Node.CPU)
	}
	if s.Node.Memory == nil || s.Node.Memory.WorkingSetBytes == nil {
		t.Errorf("node memory without working set: %+v", s.Node.Memory)
	}
	if s.Node.Runtime == nil || s.Node.Runtime.ImageFs == nil || s.Node.Runtime.ImageFs.CapacityBytes == nil {
		t.Errorf("no imageFs: %+v", s.Node.Runtime)
	}
	for _, pod := range s.Pods {
		if pod.CPU == nil || pod.CPU.UsageNanoCores == nil {
			t.Errorf("pod %s: cpu without usageNanoCores: %+v", pod.PodRef.Name, pod.CPU)
		}
		for _, c := range pod.Containers {
			if c.CPU == nil || c.CPU.UsageNanoCores == nil {
				t.Errorf("pod %s container %s: cpu without usageNanoCores", pod.PodRef.Name, c.Name)
			}
		}
	}
	if testing.Verbose() {
		b, _ := json.MarshalIndent(s, "", "  ")
		t.Logf("summary: %s", b)
	}

	// A second call over more than the minimum window: every rate is the
	// counter's increase over the time between the two samples.
	time.Sleep(1200 * time.Millisecond)
	s2, err := p.Summary(ctx)
	if err != nil {
		t.Fatalf("second Summary: %v", err)
	}
	checkRate := func(what string, a, b *statsv1alpha1.CPUStats) {
		if a == nil || b == nil || a.UsageCoreNanoSeconds == nil || b.UsageCoreNanoSeconds == nil || b.UsageNanoCores == nil {
			return
		}
		dt := b.Time.Sub(a.Time.Time)
		if dt < time.Second {
			t.Errorf("%s: samples %v apart", what, dt)
			return
		}
		want := float64(*b.UsageCoreNanoSeconds-*a.UsageCoreNanoSeconds) / dt.Seconds()
		if got := float64(*b.UsageNanoCores); math.Abs(got-want) > 0.01*want+1 {
			t.Errorf("%s: usageNanoCores %v, want %v", what, got, want)
		}
		t.Logf("%s: %.0f nanocores over %v", what, float64(*b.UsageNanoCores), dt)
	}
	checkRate("node", s.Node.CPU, s2.Node.CPU)
	for _, p1 := range s.Pods {
		for _, p2 := range s2.Pods {
			if p1.PodRef != p2.PodRef {
				continue
			}
			checkRate("pod "+p1.PodRef.Name, p1.CPU, p2.CPU)
			for _, c1 := range p1.Containers {
				for _, c2 := range p2.Containers {
					if c1.Name == c2.Name && c1.StartTime.Equal(&c2.StartTime) {
						checkRate("container "+p1.PodRef.Name+"/"+c1.Name, c1.CPU, c2.CPU)
					}
				}
			}
		}
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(p.ResourceCollector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(buf.String(), "resource_scrape_error 0") {
		t.Errorf("scrape error:\n%s", buf.String())
	}
	if testing.Verbose() {
		t.Logf("metrics:\n%s", buf.String())
	}
}
