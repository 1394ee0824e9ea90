package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	nodeagent "github.com/nodelet/nodelet/test/agent"
)

// Floor is the runtime's own time for a burst: the same pods (a sandbox
// with the agents' network, one busybox container) created straight
// through the CRI by this program, with no agent, API server or scheduler.
// Each pod's time runs from the start of the burst to the return of its
// StartContainer. No agent can start pods faster than this on this machine.
type Floor struct {
	Pods        int       `json:"pods"`
	Failed      int       `json:"failed,omitempty"`
	FirstError  string    `json:"firstError,omitempty"`
	Concurrency int       `json:"concurrency"`
	When        string    `json:"when,omitempty"` // before or after the agents ran
	Started     Stats     `json:"started"`
	AllSeconds  float64   `json:"allSeconds"`
	StartedMs   []float64 `json:"startedMs"`
	// CPUSeconds: what the machine, containerd, the control plane's
	// processes (idle here) and the groups of groupCPU spent from the
	// start of the burst to 5 s after its last start (as a burst's window
	// ends 5 s after its last pod was Ready).
	CPUSeconds map[string]float64 `json:"cpuSeconds,omitempty"`
	// CRI: the CRI calls containerd answered in the same window, by method.
	CRI map[string]float64 `json:"cri,omitempty"`
}

// runtimeFloor runs one floor burst of n pods, at most conc at a time (0:
// all at once), then removes them.
func (h *harness) runtimeFloor(ctx context.Context, n, conc int) (*Floor, error) {
	ns := fmt.Sprintf("%sfloor-%d", nsPrefix, time.Now().UnixNano())
	logDir, err := os.MkdirTemp("", "floor-logs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(logDir)
	defer func() {
		if err := h.removeSandboxes(context.Background(), ns); err != nil {
			log.Printf("floor cleanup: %v", err)
		}
		nodeagent.RemoveKubepods()
	}()
	if conc <= 0 || conc > n {
		conc = n
	}
	settle()
	others := h.otherPids()
	cpu := func() map[string]float64 {
		m := groupCPU(others["containerd"])
		m["machine"] = machineBusy()
		for k, pid := range others {
			if p, err := readProc(pid); err == nil {
				m[k] = p.CPU
			}
		}
		return m
	}
	before := cpu()
	criBefore := h.criCalls()
	sem := make(chan struct{}, conc)
	var (
		mu   sync.Mutex
		done []float64
		errs []error
		wg   sync.WaitGroup
	)
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			_, err := h.floorPod(ctx, ns, fmt.Sprintf("f%d", i), filepath.Join(logDir, fmt.Sprint(i)), sleepCommand)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			done = append(done, ms(time.Since(start)))
		}(i)
	}
	wg.Wait()
	// The CPU over the same kind of window as a burst's: until 5 s after
	// the last start (the idle shims' and kernel's work after a burst
	// counts for the agents too).
	time.Sleep(5 * time.Second)
	used := cpu()
	calls := criDiff(criBefore, h.criCalls())
	for k := range used {
		used[k] -= before[k]
	}
	// A few pods the runtime fails to start under load are a result, not
	// the end of the measurement; all of them failing is.
	if len(done) == 0 {
		return nil, fmt.Errorf("every floor pod failed; first: %w", errs[0])
	}
	sort.Float64s(done)
	f := &Floor{Pods: n, Concurrency: conc, Started: stats(done), AllSeconds: done[len(done)-1] / 1000, StartedMs: done, Failed: len(errs), CPUSeconds: used, CRI: calls}
	if len(errs) > 0 {
		f.FirstError = errs[0].Error()
		log.Printf("runtime floor: %d of %d pods failed in the runtime; first: %v", len(errs), n, errs[0])
	}
	log.Printf("runtime floor, %d pods, %d at a time: started p50 %.0f p99 %.0f ms, all %.2f s, memory cgroups %d, CPU-s %v, CRI calls %v",
		n, conc, f.Started.P50, f.Started.P99, f.AllSeconds, memoryCgroups(), used, calls)
	return f, nil
}

// floorPod creates and starts one pod as an agent would: sandbox (in a
// BestEffort pod cgroup, with the DNS settings of the agents' resolv.conf),
// container with the three mounts every kubelet gives the benchmark's pod
// (/etc/hosts, /dev/termination-log and the service account token's
// directory, written here as the agents write theirs), start; cmd is the
// container's command.
func (h *harness) floorPod(ctx context.Context, ns, name, logDir string, cmd []string) (floorIDs, error) {
	uid := string(uuid.NewUUID())
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return floorIDs{}, err
	}
	mounts, err := kubeletMounts(filepath.Join(logDir, "kubelet"), name)
	if err != nil {
		return floorIDs{}, err
	}
	box := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Uid: uid, Namespace: ns},
		Hostname:     name,
		LogDirectory: logDir,
		DnsConfig:    &runtimeapi.DNSConfig{Servers: []string{"127.0.0.1"}},
		Labels:       map[string]string{"io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.name": name, "io.kubernetes.pod.uid": uid},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: "/kubepods/besteffort/pod" + uid,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER},
			},
		},
	}
	id, err := h.floorRT.RunPodSandbox(ctx, box, "")
	if err != nil {
		return floorIDs{}, fmt.Errorf("RunPodSandbox: %w", err)
	}
	c := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
		Image:    &runtimeapi.ImageSpec{Image: h.env["BUSYBOX_IMAGE"]},
		Command:  cmd,
		LogPath:  "c/0.log",
		Mounts:   mounts,
		Labels:   map[string]string{"io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.name": name, "io.kubernetes.container.name": "c"},
		Linux:    &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{CpuShares: 2}},
	}
	cid, err := h.floorRT.CreateContainer(ctx, id, c, box)
	if err != nil {
		return floorIDs{sandbox: id}, fmt.Errorf("CreateContainer: %w", err)
	}
	if err := h.floorRT.StartContainer(ctx, cid); err != nil {
		return floorIDs{sandbox: id, container: cid}, fmt.Errorf("StartContainer: %w", err)
	}
	return floorIDs{sandbox: id, container: cid}, nil
}

// floorIDs are a floor pod's sandbox and container.
type floorIDs struct{ sandbox, container string }

// The floor pods' commands: the startup burst's, and the deletion
// scenario's (its process exits on SIGTERM, as benchPod's with trap).
var (
	sleepCommand = []string{"sleep", "3600"}
	trapCommand  = []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"}
)

// kubeletMounts writes, under dir, what a kubelet mounts into the
// benchmark's container (an /etc/hosts, an empty termination log, a
// service account token volume with its three files) and returns the
// mounts.
func kubeletMounts(dir, hostname string) ([]*runtimeapi.Mount, error) {
	token := filepath.Join(dir, "token")
	if err := os.MkdirAll(token, 0o755); err != nil {
		return nil, err
	}
	files := map[string]string{
		filepath.Join(dir, "etc-hosts"):       "127.0.0.1\tlocalhost\n10.88.0.2\t" + hostname + "\n",
		filepath.Join(dir, "termination-log"): "",
		filepath.Join(token, "token"):         strings.Repeat("t", 1000),
		filepath.Join(token, "ca.crt"):        strings.Repeat("c", 1100),
		filepath.Join(token, "namespace"):     "bench",
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	return []*runtimeapi.Mount{
		{ContainerPath: "/var/run/secrets/kubernetes.io/serviceaccount", HostPath: token, Readonly: true},
		{ContainerPath: "/etc/hosts", HostPath: filepath.Join(dir, "etc-hosts")},
		{ContainerPath: "/dev/termination-log", HostPath: filepath.Join(dir, "termination-log")},
	}, nil
}

// memoryCgroups is the kernel's count of memory cgroups, dying ones (removed
// but still holding charged pages) included.
func memoryCgroups() int {
	data, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "memory" {
			n, _ := strconv.Atoi(f[2])
			return n
		}
	}
	return -1
}

// dropCaches writes back and drops the page cache, dentries and inodes, so
// that memory cgroups removed earlier but kept alive by pages charged to
// them (~300 more after each burst of 100 pods on cgroup v1, thousands
// after a run) are freed and every measured burst, deletion and floor
// burst starts from the same kernel state (settle calls it, and so does
// each agent's start). How much they slow the runtime is not settled: a
// floor after a run with ~2,900 of them was ~25 % slower than one before,
// but the same floor also drifts by that much within an hour on this VM
// with the caches dropped each time.
func dropCaches() {
	before := memoryCgroups()
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o200); err != nil {
		log.Printf("drop caches: %v", err)
		return
	}
	log.Printf("dropped caches: memory cgroups %d -> %d", before, memoryCgroups())
}
