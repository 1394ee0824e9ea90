package stats

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/ctortest"
)

// newProvider is New for tests: it fails the test on an error.
func newProvider(t *testing.T, cfg Config) *Provider {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// writeFiles creates files (relative path -> content) under root.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const netDevFixture = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 449973842  880085    0    1    0     0          0         0 449973842  880085    0    0    0     0       0          0
  eth0: 346607367   20110    3    0    0     0          0         0  1663874   15175    4    0    0     0       0          0
veth7d59e0f4:  1000  10    0    0    0     0          0         0  2000   20    0    0    0     0       0          0
nodelet0:43042     611    0    0    0     0          0       255    43730     499    0    0    0     0       0          0
`

// procFixture is a /proc with what the provider reads.
func procFixture(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"meminfo":                "MemTotal:        1000000 kB\nMemFree:          400000 kB\nSwapTotal:        200000 kB\nSwapFree:         150000 kB\n",
		"net/dev":                netDevFixture,
		"loadavg":                "0.10 0.20 0.30 3/250 12345\n",
		"sys/kernel/pid_max":     "4194304\n",
		"sys/kernel/threads-max": "63000\n",
	})
	return root
}

// cgroupV1Fixture is a cgroup v1 root with the given cpuacct.usage, usage
// and memory.stat counters.
func cgroupV1Fixture(t *testing.T, cpuNanos string) string {
	t.Helper()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"cpuacct/cpuacct.usage":        cpuNanos + "\n",
		"memory/memory.usage_in_bytes": "500000000\n",
		"memory/memory.stat": "cache 1\nrss 2\ninactive_file 3\n" +
			"total_cache 300000000\ntotal_rss 120000000\ntotal_inactive_file 100000000\n" +
			"total_pgfault 777\ntotal_pgmajfault 7\n",
	})
	return root
}

// fakeRuntime is a RuntimeService with only what the provider calls.
type fakeRuntime struct {
	internalapi.RuntimeService

	mu             sync.Mutex
	sandboxes      []*runtimeapi.PodSandbox
	containers     []*runtimeapi.Container
	sandboxStats   func() ([]*runtimeapi.PodSandboxStats, error)
	containerStats func() ([]*runtimeapi.ContainerStats, error)
	listErr        error
	calls          map[string]int
}

func (f *fakeRuntime) count(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = make(map[string]int)
	}
	f.calls[name]++
}

func (f *fakeRuntime) callCount(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func (f *fakeRuntime) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	f.count("ListPodSandbox")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	return append([]*runtimeapi.PodSandbox(nil), f.sandboxes...), nil
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.count("ListContainers")
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*runtimeapi.Container(nil), f.containers...), nil
}

func (f *fakeRuntime) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	f.count("ListPodSandboxStats")
	f.mu.Lock()
	fn := f.sandboxStats
	f.mu.Unlock()
	return fn()
}

func (f *fakeRuntime) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	f.count("ListContainerStats")
	f.mu.Lock()
	fn := f.containerStats
	f.mu.Unlock()
	return fn()
}

// fakeImages is an ImageManagerService with only ImageFsInfo.
type fakeImages struct {
	internalapi.ImageManagerService
	resp *runtimeapi.ImageFsInfoResponse
}

func (f *fakeImages) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return f.resp, nil
}

func sandbox(id, ns, name, uid string, ready bool, created time.Time) *runtimeapi.PodSandbox {
	st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if ready {
		st = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return &runtimeapi.PodSandbox{
		Id:        id,
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: name, Namespace: ns, Uid: uid},
		State:     st,
		CreatedAt: created.UnixNano(),
	}
}

func container(id, sandboxID, name string, running bool, created time.Time) *runtimeapi.Container {
	st := runtimeapi.ContainerState_CONTAINER_EXITED
	if running {
		st = runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	return &runtimeapi.Container{
		Id:           id,
		PodSandboxId: sandboxID,
		Metadata:     &runtimeapi.ContainerMetadata{Name: name},
		State:        st,
		CreatedAt:    created.UnixNano(),
	}
}

func u64(v uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: v} }

// cpuAt is a CpuUsage of cores cores used since start, read at now.
func cpuAt(now, start time.Time, cores float64) *runtimeapi.CpuUsage {
	return &runtimeapi.CpuUsage{
		Timestamp:            now.UnixNano(),
		UsageCoreNanoSeconds: u64(uint64(cores * float64(now.Sub(start)))),
		// containerd 1.6 reports 0 on its first call: it must not be used.
		UsageNanoCores: u64(0),
	}
}

func memUsage(now time.Time, usage, ws uint64) *runtimeapi.MemoryUsage {
	return &runtimeapi.MemoryUsage{
		Timestamp:       now.UnixNano(),
		UsageBytes:      u64(usage),
		WorkingSetBytes: u64(ws),
		RssBytes:        u64(ws / 2),
		PageFaults:      u64(10),
		MajorPageFaults: u64(1),
		AvailableBytes:  u64(0), // as containerd 1.6 without limit
	}
}

func newFakeClock(t time.Time) *clocktesting.FakeClock { return clocktesting.NewFakeClock(t) }

func TestNew(t *testing.T) {
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no runtime", Config: Config{}, WantErr: "Config.Runtime is required"},
		{Name: "a nil clock and logger are defaulted", Config: Config{Runtime: &fakeRuntime{}}},
	}, func(t *testing.T, p *Provider) {
		ctortest.RealClock(t, p.clock)
		if p.logger.GetSink() == nil {
			t.Error("no logger: the scrapes' errors would be lost")
		}
	})
}
