package stats

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func gather(c prometheus.Collector) ([]*dto.MetricFamily, error) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return reg.Gather()
}

func TestResourceCollector(t *testing.T) {
	e := newEnv(t)
	col := e.p.ResourceCollector()

	// Timestamps are milliseconds of the samples: the node's at the
	// provider's clock, the pods' and containers' at the runtime's.
	const expected = `
# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="ns",pod="a"} 900 1893456000000
container_cpu_usage_seconds_total{container="app",namespace="ns",pod="b"} 3600 1893456000000
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="app",namespace="ns",pod="a"} 2.097152e+07 1893456000000
container_memory_working_set_bytes{container="app",namespace="ns",pod="b"} 2.097152e+07 1893456000000
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="app",namespace="ns",pod="a"} 1.8934524e+09
container_start_time_seconds{container="app",namespace="ns",pod="b"} 1.89345246e+09
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 1 1893456000000
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 4e+08 1893456000000
# HELP node_swap_usage_bytes [ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems
# TYPE node_swap_usage_bytes gauge
node_swap_usage_bytes 5.12e+07 1893456000000
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="ns",pod="a"} 1800 1893456000000
pod_cpu_usage_seconds_total{namespace="ns",pod="b"} 3600 1893456000000
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="ns",pod="a"} 4.194304e+07 1893456000000
pod_memory_working_set_bytes{namespace="ns",pod="b"} 5.24288e+06 1893456000000
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(expected)); err != nil {
		t.Error(err)
	}
	// The collector neither samples twice nor walks filesystems.
	if n := e.rt.callCount("ListPodSandboxStats"); n != 1 {
		t.Errorf("ListPodSandboxStats called %d times, want 1", n)
	}
	if n := e.p.volumes.len(); n != 0 {
		t.Errorf("the collector measured %d volumes", n)
	}

	// A second scrape a minute later: new values, new timestamps.
	e.clock.Step(time.Minute)
	mfs, err := gather(col)
	if err != nil {
		t.Fatal(err)
	}
	wantMs := t0.Add(time.Minute).UnixMilli()
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			switch mf.GetName() {
			case "container_start_time_seconds", "resource_scrape_error":
				if m.TimestampMs != nil {
					t.Errorf("%s has a timestamp", mf.GetName())
				}
			default:
				if m.GetTimestampMs() != wantMs {
					t.Errorf("%s timestamp %d, want %d", mf.GetName(), m.GetTimestampMs(), wantMs)
				}
			}
			if mf.GetName() == "pod_cpu_usage_seconds_total" && m.GetLabel()[1].GetValue() == "a" {
				if got := m.GetCounter().GetValue(); got != 1830 {
					t.Errorf("pod a cpu = %v, want 1830", got)
				}
			}
		}
	}
}

func TestResourceCollectorError(t *testing.T) {
	e := newEnv(t)
	e.rt.listErr = errors.New("runtime down")
	const expected = `
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 1
`
	if err := testutil.CollectAndCompare(e.p.ResourceCollector(), strings.NewReader(expected)); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(e.p.ResourceCollector()); n != 1 {
		t.Errorf("%d metrics on error, want 1", n)
	}
}

// Two ready sandboxes of one pod name must not make the scrape fail.
func TestResourceCollectorDuplicatePods(t *testing.T) {
	e := newEnv(t)
	e.rt.sandboxes = []*runtimeapi.PodSandbox{
		sandbox("sb-a", "ns", "a", "uid-a", true, start),
		sandbox("sb-a2", "ns", "a", "uid-a2", true, start.Add(time.Minute)),
	}
	e.rt.containers = []*runtimeapi.Container{
		container("c-a1", "sb-a", "app", true, start),
		container("c-a2", "sb-a2", "app", true, start.Add(time.Minute)),
	}
	e.rt.sandboxStats = func() ([]*runtimeapi.PodSandboxStats, error) {
		now := e.clock.Now()
		var out []*runtimeapi.PodSandboxStats
		for _, id := range []string{"sb-a", "sb-a2"} {
			out = append(out, &runtimeapi.PodSandboxStats{
				Attributes: &runtimeapi.PodSandboxAttributes{Id: id},
				Linux: &runtimeapi.LinuxPodSandboxStats{
					Cpu:        cpuAt(now, start, 1),
					Memory:     memUsage(now, 1, 1),
					Containers: []*runtimeapi.ContainerStats{e.containerStats("c-"+id[3:], "app", now, 1)},
				},
			})
		}
		return out, nil
	}
	s, err := e.p.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 2 || s.Pods[0].PodRef.UID != "uid-a2" {
		t.Fatalf("summary pods = %+v, want both, newest first", s.Pods)
	}
	mfs, err := gather(e.p.ResourceCollector())
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatal(err)
		}
	}
	text := buf.String()
	if n := strings.Count(text, `pod_cpu_usage_seconds_total{namespace="ns",pod="a"}`); n != 1 {
		t.Errorf("pod a cpu reported %d times:\n%s", n, text)
	}
	// The newest sandbox wins: its container started a minute later.
	if !strings.Contains(text, `container_start_time_seconds{container="app",namespace="ns",pod="a"} 1.89345246e+09`) {
		t.Errorf("not the newest sandbox's container:\n%s", text)
	}
}
