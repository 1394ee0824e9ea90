package stats

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/machine"
)

const mi = 1024 * 1024

var (
	t0    = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	start = t0.Add(-time.Hour)
)

// env is a provider over a fake runtime and fixture directories.
type env struct {
	clock    *clocktesting.FakeClock
	rt       *fakeRuntime
	p        *Provider
	cgroup   string
	rootDir  string
	logsDir  string
	imageDir string
	pods     []PodInfo
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{
		clock:    newFakeClock(t0),
		cgroup:   cgroupV1Fixture(t, "1000000000"),
		rootDir:  t.TempDir(),
		logsDir:  t.TempDir(),
		imageDir: t.TempDir(),
	}
	e.rt = &fakeRuntime{
		sandboxes: []*runtimeapi.PodSandbox{
			sandbox("sb-a", "ns", "a", "uid-a", true, start),
			sandbox("sb-a-old", "ns", "a", "uid-a-old", false, start.Add(-time.Hour)),
			sandbox("sb-b", "ns", "b", "uid-b", true, start.Add(time.Minute)),
		},
		containers: []*runtimeapi.Container{
			container("c-a1", "sb-a", "app", true, start),
			container("c-a0", "sb-a", "init", false, start),
			container("c-b1", "sb-b", "app", true, start.Add(time.Minute)),
			container("c-old", "sb-a-old", "app", true, start.Add(-time.Hour)),
		},
	}
	e.rt.sandboxStats = func() ([]*runtimeapi.PodSandboxStats, error) {
		now := e.clock.Now()
		return []*runtimeapi.PodSandboxStats{
			{
				Attributes: &runtimeapi.PodSandboxAttributes{Id: "sb-a"},
				Linux: &runtimeapi.LinuxPodSandboxStats{
					Cpu:    cpuAt(now, start, 0.5),
					Memory: memUsage(now, 50*mi, 40*mi),
					Network: &runtimeapi.NetworkUsage{ // as containerd 1.6: no timestamp, no list
						DefaultInterface: &runtimeapi.NetworkInterfaceUsage{Name: "eth0", RxBytes: u64(100), TxBytes: u64(200), RxErrors: u64(0), TxErrors: u64(0)},
					},
					Process:    &runtimeapi.ProcessUsage{Timestamp: now.UnixNano(), ProcessCount: u64(3)},
					Containers: []*runtimeapi.ContainerStats{e.containerStats("c-a1", "app", now, 0.25), exitedStats("c-a0", "init", e.imageDir)},
				},
			},
			{
				Attributes: &runtimeapi.PodSandboxAttributes{Id: "sb-b"},
				Linux: &runtimeapi.LinuxPodSandboxStats{
					Cpu:        cpuAt(now, start, 1),
					Memory:     memUsage(now, 10*mi, 5*mi),
					Containers: []*runtimeapi.ContainerStats{e.containerStats("c-b1", "app", now, 1)},
				},
			},
			{
				Attributes: &runtimeapi.PodSandboxAttributes{Id: "sb-gone"},
				Linux:      &runtimeapi.LinuxPodSandboxStats{Cpu: cpuAt(now, start, 1)},
			},
		}, nil
	}
	e.rt.containerStats = func() ([]*runtimeapi.ContainerStats, error) {
		now := e.clock.Now()
		return []*runtimeapi.ContainerStats{
			e.containerStats("c-a1", "app", now, 0.25),
			exitedStats("c-a0", "init", e.imageDir),
			e.containerStats("c-b1", "app", now, 1),
			e.containerStats("c-old", "app", now, 1),
		}, nil
	}

	volDir := filepath.Join(e.rootDir, "pods", "uid-a", "volumes")
	writeFiles(t, volDir, map[string]string{
		"kubernetes.io~empty-dir/cache/data":   strings.Repeat("d", 20000),
		"kubernetes.io~empty-dir/cache/sub/x":  "x",
		"kubernetes.io~configmap/cfg/key":      strings.Repeat("c", 100),
		"kubernetes.io~secret/tok/token":       strings.Repeat("t", 50),
		"kubernetes.io~projected/kube-api/ca":  "ca",
		"kubernetes.io~downward-api/info/name": "a",
	})
	writeFiles(t, e.logsDir, map[string]string{
		"ns_a_uid-a/app/0.log":  strings.Repeat("l", 3000),
		"ns_a_uid-a/stray.file": strings.Repeat("s", 1000),
		"ns_b_uid-b/app/0.log":  "b",
	})
	e.pods = []PodInfo{{
		VolumeDir: volDir,
		Pod: &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "uid-a"},
			Spec: v1.PodSpec{
				Containers: []v1.Container{{
					Name:      "app",
					Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi")}},
				}},
				Volumes: []v1.Volume{
					{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
					{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
					{Name: "tok", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{}}},
					{Name: "shm", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
					{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/"}}},
					{Name: "kube-api", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}},
					{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}}},
				},
			},
		},
	}}
	e.p = newProvider(t, Config{
		NodeName:   "node-1",
		RootDir:    e.rootDir,
		PodLogsDir: e.logsDir,
		Runtime:    e.rt,
		Images: &fakeImages{resp: &runtimeapi.ImageFsInfoResponse{
			ImageFilesystems: []*runtimeapi.FilesystemUsage{{
				Timestamp:  t0.UnixNano(),
				FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: e.imageDir},
				UsedBytes:  u64(123456),
				InodesUsed: u64(42),
			}},
		}},
		Pods:  func() []PodInfo { return e.pods },
		Clock: e.clock,
		Machine: machine.Facts{
			Cgroups:        machine.ReadCgroups(e.cgroup),
			MemoryCapacity: 1000000 * 1024, // procFixture's MemTotal
			BootTime:       time.Unix(1700000000, 0),
		},
		ProcRoot: procFixture(t),
	})
	return e
}

func (e *env) containerStats(id, name string, now time.Time, cores float64) *runtimeapi.ContainerStats {
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: name}},
		Cpu:        cpuAt(now, start, cores),
		Memory:     memUsage(now, 30*mi, 20*mi),
		WritableLayer: &runtimeapi.FilesystemUsage{
			Timestamp:  now.Add(-5 * time.Second).UnixNano(),
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: e.imageDir},
			UsedBytes:  u64(4096),
			InodesUsed: u64(3),
		},
	}
}

// exitedStats is what containerd 1.6 gives for an exited container.
func exitedStats(id, name, mount string) *runtimeapi.ContainerStats {
	return &runtimeapi.ContainerStats{
		Attributes:    &runtimeapi.ContainerAttributes{Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: name}},
		WritableLayer: &runtimeapi.FilesystemUsage{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: mount}, UsedBytes: u64(1)},
	}
}

func findPod(t *testing.T, s *statsv1alpha1.Summary, name string) *statsv1alpha1.PodStats {
	t.Helper()
	for i := range s.Pods {
		if s.Pods[i].PodRef.Name == name {
			return &s.Pods[i]
		}
	}
	t.Fatalf("no pod %q in %+v", name, s.Pods)
	return nil
}

func eqPtr(t *testing.T, what string, got *uint64, want uint64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s = nil, want %d", what, want)
	} else if *got != want {
		t.Errorf("%s = %d, want %d", what, *got, want)
	}
}

func TestSummaryFromSandboxStats(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	s, err := e.p.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The first call samples again 100ms later to have rates.
	if n := e.rt.callCount("ListPodSandboxStats"); n != 2 {
		t.Errorf("ListPodSandboxStats called %d times, want 2", n)
	}
	if got := e.clock.Now(); !got.Equal(t0.Add(100 * time.Millisecond)) {
		t.Errorf("clock at %v, want 100ms after start", got)
	}
	sampleAt := t0.Add(100 * time.Millisecond)

	// Node.
	n := s.Node
	if n.NodeName != "node-1" || !n.StartTime.Equal(&metav1.Time{Time: time.Unix(1700000000, 0)}) {
		t.Errorf("node name/start = %q %v", n.NodeName, n.StartTime)
	}
	if n.CPU == nil || !n.CPU.Time.Time.Equal(sampleAt) {
		t.Fatalf("node cpu = %+v", n.CPU)
	}
	eqPtr(t, "node usageCoreNanoSeconds", n.CPU.UsageCoreNanoSeconds, 1000000000)
	eqPtr(t, "node usageNanoCores", n.CPU.UsageNanoCores, 0)
	eqPtr(t, "node workingSet", n.Memory.WorkingSetBytes, 400000000)
	eqPtr(t, "node usage", n.Memory.UsageBytes, 500000000)
	eqPtr(t, "node rss", n.Memory.RSSBytes, 120000000)
	eqPtr(t, "node pageFaults", n.Memory.PageFaults, 777)
	eqPtr(t, "node majorPageFaults", n.Memory.MajorPageFaults, 7)
	eqPtr(t, "node available", n.Memory.AvailableBytes, 1000000*1024-400000000)
	eqPtr(t, "node swap usage", n.Swap.SwapUsageBytes, 50000*1024)
	eqPtr(t, "node swap available", n.Swap.SwapAvailableBytes, 150000*1024)
	if n.Network == nil || n.Network.Name != "eth0" || len(n.Network.Interfaces) != 2 ||
		n.Network.Interfaces[0].Name != "eth0" || n.Network.Interfaces[1].Name != "nodelet0" {
		t.Errorf("node network = %+v", n.Network)
	} else {
		eqPtr(t, "node eth0 rxErrors", n.Network.RxErrors, 3)
		eqPtr(t, "node eth0 txBytes", n.Network.TxBytes, 1663874)
	}
	if n.Fs == nil || n.Fs.CapacityBytes == nil || n.Fs.UsedBytes == nil || n.Fs.InodesUsed == nil {
		t.Errorf("node fs = %+v", n.Fs)
	}
	if n.Runtime == nil || n.Runtime.ImageFs == nil || n.Runtime.ContainerFs == nil {
		t.Fatalf("runtime = %+v", n.Runtime)
	}
	eqPtr(t, "imageFs used", n.Runtime.ImageFs.UsedBytes, 123456)
	eqPtr(t, "imageFs inodesUsed", n.Runtime.ImageFs.InodesUsed, 42)
	if n.Runtime.ImageFs.CapacityBytes == nil || !n.Runtime.ImageFs.Time.Time.Equal(t0) {
		t.Errorf("imageFs = %+v", n.Runtime.ImageFs)
	}
	if n.Rlimit == nil || *n.Rlimit.MaxPID != 63000 || *n.Rlimit.NumOfRunningProcesses != 250 {
		t.Errorf("rlimit = %+v", n.Rlimit)
	}

	// Pods: a (the ready sandbox, not the old one) and b; not sb-gone.
	if len(s.Pods) != 2 || s.Pods[0].PodRef.Name != "a" || s.Pods[1].PodRef.Name != "b" {
		t.Fatalf("pods = %+v", s.Pods)
	}
	a := findPod(t, s, "a")
	if a.PodRef != (statsv1alpha1.PodReference{Name: "a", Namespace: "ns", UID: "uid-a"}) || !a.StartTime.Time.Equal(start) {
		t.Errorf("pod a ref/start = %+v %v", a.PodRef, a.StartTime)
	}
	eqPtr(t, "pod a usageNanoCores", a.CPU.UsageNanoCores, 500_000_000)
	eqPtr(t, "pod a usageCoreNanoSeconds", a.CPU.UsageCoreNanoSeconds, uint64(0.5*float64(sampleAt.Sub(start))))
	eqPtr(t, "pod a workingSet", a.Memory.WorkingSetBytes, 40*mi)
	eqPtr(t, "pod a available (limit 100Mi)", a.Memory.AvailableBytes, 60*mi)
	if a.Network == nil || a.Network.Name != "eth0" || !a.Network.Time.Time.Equal(sampleAt) || len(a.Network.Interfaces) != 1 {
		t.Errorf("pod a network = %+v", a.Network)
	} else {
		eqPtr(t, "pod a rxBytes", a.Network.RxBytes, 100)
	}
	if a.ProcessStats == nil {
		t.Error("pod a: no process stats")
	} else {
		eqPtr(t, "pod a processes", a.ProcessStats.ProcessCount, 3)
	}

	// Its running container only.
	if len(a.Containers) != 1 || a.Containers[0].Name != "app" {
		t.Fatalf("pod a containers = %+v", a.Containers)
	}
	c := a.Containers[0]
	if !c.StartTime.Time.Equal(start) {
		t.Errorf("container start = %v", c.StartTime)
	}
	eqPtr(t, "container usageNanoCores", c.CPU.UsageNanoCores, 250_000_000)
	eqPtr(t, "container workingSet", c.Memory.WorkingSetBytes, 20*mi)
	eqPtr(t, "container available (limit 100Mi)", c.Memory.AvailableBytes, 80*mi)
	eqPtr(t, "container rootfs used", c.Rootfs.UsedBytes, 4096)
	eqPtr(t, "container rootfs inodes", c.Rootfs.InodesUsed, 3)
	if c.Rootfs.CapacityBytes == nil || !c.Rootfs.Time.Time.Equal(sampleAt.Add(-5*time.Second)) {
		t.Errorf("container rootfs = %+v", c.Rootfs)
	}
	logBytes := blocks(t, filepath.Join(e.logsDir, "ns_a_uid-a/app/0.log"))
	if c.Logs == nil {
		t.Fatal("container: no logs stats")
	}
	eqPtr(t, "container logs used", c.Logs.UsedBytes, logBytes)
	eqPtr(t, "container logs inodes", c.Logs.InodesUsed, 1)
	if c.Logs.CapacityBytes == nil {
		t.Errorf("container logs without capacity: %+v", c.Logs)
	}

	// Volumes: every measured kind that exists, in spec order.
	var names []string
	vols := map[string]statsv1alpha1.VolumeStats{}
	for _, v := range a.VolumeStats {
		names = append(names, v.Name)
		vols[v.Name] = v
	}
	if got := strings.Join(names, ","); got != "cache,cfg,tok,kube-api,info" {
		t.Errorf("volumes = %s", got)
	}
	volDir := e.pods[0].VolumeDir
	cache, err := diskUsage(filepath.Join(volDir, "kubernetes.io~empty-dir/cache"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := diskUsage(filepath.Join(volDir, "kubernetes.io~configmap/cfg"))
	if err != nil {
		t.Fatal(err)
	}
	eqPtr(t, "cache used", vols["cache"].UsedBytes, cache.bytes)
	eqPtr(t, "cache inodes", vols["cache"].InodesUsed, 4) // dir, data, sub, sub/x
	if vols["cache"].CapacityBytes == nil || vols["cache"].AvailableBytes == nil {
		t.Errorf("cache volume = %+v", vols["cache"])
	}

	// Ephemeral storage: rootfs + logs + pod log files + emptyDir + configMap.
	stray := blocks(t, filepath.Join(e.logsDir, "ns_a_uid-a/stray.file"))
	eqPtr(t, "ephemeral used", a.EphemeralStorage.UsedBytes, 4096+logBytes+stray+cache.bytes+cfg.bytes)
	eqPtr(t, "ephemeral inodes", a.EphemeralStorage.InodesUsed, 3+1+1+cache.inodes+cfg.inodes)

	// Pod b: no PodInfo, so no limit: containerd's availableBytes 0 is dropped.
	b := findPod(t, s, "b")
	eqPtr(t, "pod b usageNanoCores", b.CPU.UsageNanoCores, 1_000_000_000)
	if b.Memory.AvailableBytes != nil || b.Containers[0].Memory.AvailableBytes != nil {
		t.Errorf("pod b availableBytes = %v / %v, want nil", b.Memory.AvailableBytes, b.Containers[0].Memory.AvailableBytes)
	}
	if len(b.VolumeStats) != 0 {
		t.Errorf("pod b volumes = %+v", b.VolumeStats)
	}

	// Ten seconds later: no resample, rates over the ten seconds.
	e.clock.Step(10 * time.Second)
	writeFiles(t, e.cgroup, map[string]string{"cpuacct/cpuacct.usage": "6000000000\n"})
	s, err = e.p.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.rt.callCount("ListPodSandboxStats"); n != 3 {
		t.Errorf("ListPodSandboxStats called %d times, want 3", n)
	}
	eqPtr(t, "node usageNanoCores", s.Node.CPU.UsageNanoCores, 500_000_000)
	eqPtr(t, "pod a usageNanoCores", findPod(t, s, "a").CPU.UsageNanoCores, 500_000_000)
	eqPtr(t, "container usageNanoCores", findPod(t, s, "a").Containers[0].CPU.UsageNanoCores, 250_000_000)

	// Pod b goes away: its rates are dropped.
	e.rt.mu.Lock()
	e.rt.sandboxes = e.rt.sandboxes[:2]
	e.rt.mu.Unlock()
	e.clock.Step(10 * time.Second)
	s, err = e.p.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 1 {
		t.Errorf("pods = %d, want 1", len(s.Pods))
	}
	if n := e.p.rates.len(); n != 3 {
		t.Errorf("rate cache holds %d entries, want 3 (node, pod a, container a)", n)
	}
}

func TestSummaryWithoutResample(t *testing.T) {
	e := newEnv(t)
	e.p.resampleDelay = 0
	s, err := e.p.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a := findPod(t, s, "a")
	if a.CPU.UsageNanoCores != nil || a.Containers[0].CPU.UsageNanoCores != nil || s.Node.CPU.UsageNanoCores != nil {
		t.Errorf("rates without a previous sample: pod %v container %v node %v",
			a.CPU.UsageNanoCores, a.Containers[0].CPU.UsageNanoCores, s.Node.CPU.UsageNanoCores)
	}
	if n := e.rt.callCount("ListPodSandboxStats"); n != 1 {
		t.Errorf("ListPodSandboxStats called %d times, want 1", n)
	}
}

func TestSummaryFallbackToContainerStats(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		// sandbox stats asked again after 5 minutes
		retried bool
	}{
		{"unimplemented", status.Error(codes.Unimplemented, "not implemented"), false},
		{"containerd 1.6 without cgroup parent", status.Error(codes.Unknown, "failed to get cgroup metrics for sandbox x because cgroupPath is empty"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.rt.sandboxStats = func() ([]*runtimeapi.PodSandboxStats, error) { return nil, tc.err }
			ctx := context.Background()
			s, err := e.p.Summary(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Pods) != 2 {
				t.Fatalf("pods = %+v", s.Pods)
			}
			a := findPod(t, s, "a")
			if a.PodRef.UID != "uid-a" || len(a.Containers) != 1 {
				t.Fatalf("pod a = %+v", a)
			}
			// The pod is the sum of its containers.
			eqPtr(t, "pod a usageNanoCores", a.CPU.UsageNanoCores, 250_000_000)
			eqPtr(t, "pod a usageCoreNanoSeconds", a.CPU.UsageCoreNanoSeconds, *a.Containers[0].CPU.UsageCoreNanoSeconds)
			eqPtr(t, "pod a workingSet", a.Memory.WorkingSetBytes, 20*mi)
			eqPtr(t, "pod a available", a.Memory.AvailableBytes, 80*mi)
			if a.Network != nil {
				t.Errorf("pod a network = %+v, want none", a.Network)
			}
			// No PSI can be summed: the pod's IO has its containers' time only, as upstream.
			if a.CPU.PSI != nil || a.IO == nil || a.IO.PSI != nil || !a.IO.Time.Equal(&a.Containers[0].IO.Time) {
				t.Errorf("pod a cpu psi %+v, io %+v", a.CPU.PSI, a.IO)
			}
			if b := findPod(t, s, "b"); b.Memory.AvailableBytes != nil {
				t.Errorf("pod b available = %d, want nil", *b.Memory.AvailableBytes)
			}
			if n := e.rt.callCount("ListPodSandboxStats"); n != 1 {
				t.Errorf("ListPodSandboxStats called %d times, want 1", n)
			}

			e.clock.Step(time.Minute)
			if _, err := e.p.Summary(ctx); err != nil {
				t.Fatal(err)
			}
			if n := e.rt.callCount("ListPodSandboxStats"); n != 1 {
				t.Errorf("ListPodSandboxStats called %d times after a minute, want 1", n)
			}
			e.clock.Step(sandboxStatsRetry)
			if _, err := e.p.Summary(ctx); err != nil {
				t.Fatal(err)
			}
			want := 1
			if tc.retried {
				want = 2
			}
			if n := e.rt.callCount("ListPodSandboxStats"); n != want {
				t.Errorf("ListPodSandboxStats called %d times after the retry delay, want %d", n, want)
			}
		})
	}
}

func TestSummaryErrors(t *testing.T) {
	e := newEnv(t)
	e.rt.listErr = errors.New("runtime down")
	if _, err := e.p.Summary(context.Background()); err == nil || !strings.Contains(err.Error(), "runtime down") {
		t.Errorf("err = %v, want the runtime's", err)
	}

	e = newEnv(t)
	e.rt.sandboxStats = func() ([]*runtimeapi.PodSandboxStats, error) { return nil, status.Error(codes.Unimplemented, "") }
	e.rt.containerStats = func() ([]*runtimeapi.ContainerStats, error) { return nil, errors.New("stats broken") }
	if _, err := e.p.Summary(context.Background()); err == nil {
		t.Error("a ListContainerStats failure must fail Summary")
	}

	// Node figures that cannot be read are left out, the rest is there.
	e = newEnv(t)
	e.p.cfg.Machine.Cgroups = machine.ReadCgroups(t.TempDir())
	e.p.cfg.ProcRoot = t.TempDir()
	s, err := e.p.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Node.CPU != nil || s.Node.Memory != nil || s.Node.Network != nil || s.Node.Swap != nil || s.Node.Rlimit != nil {
		t.Errorf("node = %+v", s.Node)
	}
	if len(s.Pods) != 2 {
		t.Errorf("pods = %d, want 2", len(s.Pods))
	}
}

func TestCurrentSandboxes(t *testing.T) {
	old, mid, young := start, start.Add(time.Minute), start.Add(2*time.Minute)
	for _, tc := range []struct {
		name string
		in   []*runtimeapi.PodSandbox
		want []string
	}{
		{"single not ready is kept", []*runtimeapi.PodSandbox{sandbox("1", "ns", "a", "u1", false, old)}, []string{"1"}},
		{"ready wins", []*runtimeapi.PodSandbox{
			sandbox("1", "ns", "a", "u1", false, young),
			sandbox("2", "ns", "a", "u2", true, old),
		}, []string{"2"}},
		{"newest when none ready", []*runtimeapi.PodSandbox{
			sandbox("1", "ns", "a", "u1", false, old),
			sandbox("2", "ns", "a", "u2", false, young),
			sandbox("3", "ns", "a", "u3", false, mid),
		}, []string{"2"}},
		{"other namespaces are other pods", []*runtimeapi.PodSandbox{
			sandbox("1", "ns", "a", "u1", false, old),
			sandbox("2", "other", "a", "u2", false, young),
		}, []string{"1", "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range currentSandboxes(tc.in) {
				got = append(got, s.Id)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRunningContainers(t *testing.T) {
	got := runningContainers([]*runtimeapi.Container{
		container("old", "sb", "app", true, start),
		container("new", "sb", "app", true, start.Add(time.Second)),
		container("exited", "sb", "side", false, start),
		container("other", "sb2", "app", true, start),
	})
	if len(got) != 2 || got["new"] == nil || got["other"] == nil {
		t.Errorf("running = %v, want new and other", got)
	}
}

func TestPodMemoryLimit(t *testing.T) {
	lim := func(s string) v1.ResourceRequirements {
		return v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse(s)}}
	}
	always := v1.ContainerRestartPolicyAlways
	for _, tc := range []struct {
		name string
		spec v1.PodSpec
		want int64 // -1: none
	}{
		{"no limits", v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}, -1},
		{"one container without limit", v1.PodSpec{Containers: []v1.Container{{Name: "a", Resources: lim("1Mi")}, {Name: "b"}}}, -1},
		{"sum of containers", v1.PodSpec{Containers: []v1.Container{{Name: "a", Resources: lim("1Mi")}, {Name: "b", Resources: lim("2Mi")}}}, 3 * mi},
		{"init container larger", v1.PodSpec{
			InitContainers: []v1.Container{{Name: "i", Resources: lim("10Mi")}},
			Containers:     []v1.Container{{Name: "a", Resources: lim("1Mi")}},
		}, 10 * mi},
		{"sidecar adds up", v1.PodSpec{
			InitContainers: []v1.Container{{Name: "s", RestartPolicy: &always, Resources: lim("4Mi")}},
			Containers:     []v1.Container{{Name: "a", Resources: lim("1Mi")}},
		}, 5 * mi},
		{"overhead", v1.PodSpec{
			Containers: []v1.Container{{Name: "a", Resources: lim("1Mi")}},
			Overhead:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Mi")},
		}, 2 * mi},
		{"pod-level limit", v1.PodSpec{
			Resources:  &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("7Mi")}},
			Containers: []v1.Container{{Name: "a"}},
		}, 7 * mi},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := podMemoryLimit(&v1.Pod{Spec: tc.spec})
			switch {
			case tc.want < 0 && got != nil:
				t.Errorf("limit = %d, want none", *got)
			case tc.want >= 0 && (got == nil || *got != uint64(tc.want)):
				t.Errorf("limit = %v, want %d", got, tc.want)
			}
		})
	}
}

// TestConcurrentCallers is for the race detector: Summary and the collector
// from several goroutines while time passes and pods come and go.
func TestConcurrentCallers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	col := e.p.ResourceCollector()
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 15 {
				if (i+j)%2 == 0 {
					if _, err := e.p.Summary(ctx); err != nil {
						t.Error(err)
						return
					}
				} else {
					if _, err := gather(col); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 30 {
			e.clock.Step(700 * time.Millisecond)
			e.rt.mu.Lock()
			if i%2 == 0 {
				e.rt.sandboxes = e.rt.sandboxes[:2]
			} else {
				e.rt.sandboxes = append(e.rt.sandboxes[:2], sandbox("sb-b", "ns", "b", "uid-b", true, start.Add(time.Minute)))
			}
			e.rt.mu.Unlock()
		}
	}()
	wg.Wait()
	if n := e.p.rates.len(); n > 5 {
		t.Errorf("rate cache holds %d entries, more than node + 2 pods + 2 containers", n)
	}
}
