package stats

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/machine"
)

// cadvisorRuntime adds what the cadvisor collector calls to fakeRuntime.
type cadvisorRuntime struct {
	*fakeRuntime
	config string
}

func (r *cadvisorRuntime) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Info: map[string]string{"config": r.config}}, nil
}

type cadvisorImages struct {
	fakeImages
	images []*runtimeapi.Image
}

func (f *cadvisorImages) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return f.images, nil
}

const (
	sandboxID   = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	containerID = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

type series struct {
	labels map[string]string
	value  float64
}

// cadvisorScrape runs the collector over a cgroup tree (v1 or v2 per
// cgroups) with one pod (a sandbox and a container) and returns its series
// by family.
func cadvisorScrape(t *testing.T, cg machine.Cgroups, podsCgroup, proc string) map[string][]series {
	t.Helper()
	now := time.Unix(1700000000, 0)
	rt := &cadvisorRuntime{
		fakeRuntime: &fakeRuntime{
			sandboxes:  []*runtimeapi.PodSandbox{sandbox(sandboxID, "ns", "web", "uid1", true, now.Add(-time.Minute))},
			containers: []*runtimeapi.Container{container(containerID, sandboxID, "app", true, now.Add(-30*time.Second))},
			containerStats: func() ([]*runtimeapi.ContainerStats, error) {
				return []*runtimeapi.ContainerStats{{
					Attributes:    &runtimeapi.ContainerAttributes{Id: containerID},
					WritableLayer: &runtimeapi.FilesystemUsage{UsedBytes: u64(4096), FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: t.TempDir()}},
				}}, nil
			},
		},
		config: `{"containerd":{},"sandboxImage":"registry.k8s.io/pause:3.10","x":1}`,
	}
	c := rt.containers[0]
	c.Labels = map[string]string{"io.kubernetes.container.name": "app", "io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "ns"}
	c.Image = &runtimeapi.ImageSpec{Image: "sha256:1111"}
	p := newProvider(t, Config{
		Runtime: rt, Images: &cadvisorImages{images: []*runtimeapi.Image{{Id: "sha256:1111", RepoTags: []string{"docker.io/library/busybox:1.36"}}}},
		Clock: newFakeClock(now), ProcRoot: proc, PodsCgroup: podsCgroup,
		Machine: machine.Facts{NumCPU: 2, MemoryCapacity: 1 << 30, BootID: "b", MachineID: "m", SystemUUID: "s", Cgroups: cg},
	})
	col := p.CadvisorCollector()
	col.(*cadvisorCollector).sys = filepath.Join(proc, "sysfs")
	fams, err := gather(col)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]series{}
	for _, f := range fams {
		for _, m := range f.Metric {
			out[f.GetName()] = append(out[f.GetName()], series{labelMap(m), metricValueOf(m)})
		}
	}
	return out
}

func labelMap(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func metricValueOf(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// find returns the value of the family's series whose labels include want.
func find(t *testing.T, got map[string][]series, name string, want map[string]string) float64 {
	t.Helper()
	for _, s := range got[name] {
		ok := true
		for k, v := range want {
			if s.labels[k] != v {
				ok = false
			}
		}
		if ok {
			return s.value
		}
	}
	t.Fatalf("no %s%v in %v", name, want, got[name])
	return 0
}

func cadvisorProc(t *testing.T) string {
	proc := procFixture(t)
	fd := filepath.Join(proc, "4242", "fd")
	if err := os.MkdirAll(fd, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"0": "/dev/null", "1": "socket:[12345]"} {
		if err := os.Symlink(target, filepath.Join(fd, name)); err != nil {
			t.Fatal(err)
		}
	}
	writeFiles(t, proc, map[string]string{
		"cpuinfo":                      "processor\t: 0\nphysical id\t: 0\ncore id\t: 0\n\nprocessor\t: 1\nphysical id\t: 0\ncore id\t: 1\n\n",
		"4242/net/dev":                 netDevFixture,
		"4242/limits":                  "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1048576              1048576              files\n",
		"sysfs/dev/block/254:0/uevent": "MAJOR=254\nMINOR=0\nDEVNAME=vda\nDEVTYPE=disk\n",
	})
	return proc
}

func TestCadvisorCollectorV1(t *testing.T) {
	root := t.TempDir()
	pod := "kubepods/burstable/poduid1"
	ctr := pod + "/" + containerID
	box := pod + "/" + sandboxID
	writeFiles(t, root, map[string]string{
		"cpuacct/cpuacct.usage":                                       "9000000000\n",
		"memory/memory.usage_in_bytes":                                "5000\n",
		"cpuacct/" + ctr + "/cpuacct.usage":                           "2500000000\n",
		"cpuacct/" + ctr + "/cpuacct.stat":                            "user 150\nsystem 50\n",
		"cpu/" + ctr + "/cpu.cfs_quota_us":                            "20000\n",
		"cpu/" + ctr + "/cpu.cfs_period_us":                           "100000\n",
		"cpu/" + ctr + "/cpu.shares":                                  "204\n",
		"cpu/" + ctr + "/cpu.stat":                                    "nr_periods 100\nnr_throttled 40\nthrottled_time 3000000000\n",
		"memory/" + ctr + "/memory.usage_in_bytes":                    "300000000\n",
		"memory/" + ctr + "/memory.max_usage_in_bytes":                "310000000\n",
		"memory/" + ctr + "/memory.limit_in_bytes":                    "536870912\n",
		"memory/" + ctr + "/memory.soft_limit_in_bytes":               "9223372036854771712\n",
		"memory/" + ctr + "/memory.failcnt":                           "3\n",
		"memory/" + ctr + "/memory.oom_control":                       "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
		"memory/" + ctr + "/memory.stat":                              "pgfault 10\npgmajfault 1\ntotal_cache 100000000\ntotal_rss 150000000\ntotal_mapped_file 5000\ntotal_swap 0\ntotal_inactive_file 60000000\ntotal_active_file 40000000\ntotal_dirty 4096\ntotal_writeback 0\ntotal_pgfault 20\ntotal_pgmajfault 2\n",
		"memory/" + ctr + "/memory.kmem.usage_in_bytes":               "777\n",
		"blkio/" + ctr + "/blkio.throttle.io_service_bytes_recursive": "254:0 Read 4096\n254:0 Write 8192\n254:0 Sync 0\n254:0 Total 12288\nTotal 12288\n",
		"blkio/" + ctr + "/blkio.throttle.io_serviced_recursive":      "254:0 Read 1\n254:0 Write 2\nTotal 3\n",
		"pids/" + ctr + "/cgroup.procs":                               "4242\n2\n",
		"pids/" + ctr + "/pids.current":                               "5\n",
		"pids/" + ctr + "/pids.max":                                   "max\n",
		"memory/" + box + "/cgroup.procs":                             "4242\n",
		"cpu/" + box + "/cpu.cfs_quota_us":                            "-1\n",
		"cpu/" + box + "/cpu.stat":                                    "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
	})
	got := cadvisorScrape(t, machine.Cgroups{Mount: root}, "/kubepods", cadvisorProc(t))
	app := map[string]string{"container": "app", "pod": "web", "namespace": "ns", "name": containerID, "image": "docker.io/library/busybox:1.36", "id": "/" + ctr}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range app {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"container_cpu_usage_seconds_total", with(map[string]string{"cpu": "total"}), 2.5},
		{"container_cpu_user_seconds_total", app, 1.5},
		{"container_cpu_system_seconds_total", app, 0.5},
		{"container_cpu_cfs_periods_total", app, 100},
		{"container_cpu_cfs_throttled_periods_total", app, 40},
		{"container_cpu_cfs_throttled_seconds_total", app, 3},
		{"container_spec_cpu_quota", app, 20000},
		{"container_spec_cpu_period", app, 100000},
		{"container_spec_cpu_shares", app, 204},
		{"container_memory_usage_bytes", app, 300000000},
		{"container_memory_working_set_bytes", app, 240000000},
		{"container_memory_rss", app, 150000000},
		{"container_memory_cache", app, 100000000},
		{"container_memory_mapped_file", app, 5000},
		{"container_memory_max_usage_bytes", app, 310000000},
		{"container_memory_failcnt", app, 3},
		{"container_memory_failures_total", with(map[string]string{"failure_type": "pgfault", "scope": "container"}), 10},
		{"container_memory_failures_total", with(map[string]string{"failure_type": "pgmajfault", "scope": "hierarchy"}), 2},
		{"container_oom_events_total", app, 2},
		{"container_spec_memory_limit_bytes", app, 536870912},
		{"container_spec_memory_reservation_limit_bytes", app, 0}, // unlimited, as cadvisor
		{"container_fs_reads_bytes_total", with(map[string]string{"device": "/dev/vda"}), 4096},
		{"container_fs_writes_bytes_total", with(map[string]string{"device": "/dev/vda"}), 8192},
		{"container_fs_reads_total", with(map[string]string{"device": "/dev/vda"}), 1},
		{"container_fs_writes_total", with(map[string]string{"device": "/dev/vda"}), 2},
		{"container_fs_usage_bytes", app, 4096},
		{"container_processes", app, 2},
		{"container_threads", app, 5},
		{"container_threads_max", app, 0},
		{"container_start_time_seconds", app, 1700000000 - 30},
		{"container_creation_time_seconds", app, 1700000000 - 30},
		{"container_memory_total_active_file_bytes", app, 40000000},
		{"container_memory_total_inactive_file_bytes", app, 60000000},
		{"container_memory_file_dirty_bytes", app, 4096},
		{"container_memory_kernel_usage", app, 777},
		{"container_blkio_device_usage_total", with(map[string]string{"device": "/dev/vda", "major": "254", "minor": "0", "operation": "Write"}), 8192},
		{"container_file_descriptors", app, 2}, // the fixture's process 4242: a file and a socket
		{"container_sockets", app, 1},
		{"container_ulimits_soft", with(map[string]string{"ulimit": "max_open_files"}), 1048576},
		{"machine_swap_bytes", nil, 200000 * 1024},
		{"container_last_seen", app, 1700000000},
		// The sandbox: the pause image, and the pod's network (lo and veth left out).
		{"container_network_receive_bytes_total", map[string]string{"container": "", "pod": "web", "name": sandboxID, "image": "registry.k8s.io/pause:3.10", "interface": "eth0"}, 346607367},
		{"container_network_transmit_packets_total", map[string]string{"pod": "web", "interface": "eth0"}, 15175},
		{"container_network_receive_errors_total", map[string]string{"pod": "web", "interface": "eth0"}, 3},
		// The root cgroup, the host's interfaces.
		{"container_cpu_usage_seconds_total", map[string]string{"id": "/", "container": "", "pod": "", "cpu": "total"}, 9},
		{"container_network_transmit_bytes_total", map[string]string{"id": "/", "interface": "eth0"}, 1663874},
		{"machine_cpu_cores", map[string]string{"boot_id": "b", "machine_id": "m", "system_uuid": "s"}, 2},
		{"machine_cpu_physical_cores", nil, 2},
		{"machine_cpu_sockets", nil, 1},
		{"machine_memory_bytes", nil, 1 << 30},
		{"machine_scrape_error", nil, 0},
		{"container_scrape_error", nil, 0},
	} {
		if v := find(t, got, tc.name, tc.labels); v != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, v, tc.want)
		}
	}
	// No throttling for the sandbox (no quota), and no network for the app
	// container (the pod's network is its sandbox's), as cadvisor.
	for _, s := range got["container_cpu_cfs_periods_total"] {
		if s.labels["name"] == sandboxID {
			t.Errorf("throttling reported for a cgroup without quota: %v", s)
		}
	}
	for _, s := range got["container_network_receive_bytes_total"] {
		if s.labels["container"] == "app" || s.labels["interface"] == "lo" || strings.HasPrefix(s.labels["interface"], "veth") {
			t.Errorf("network series %v", s.labels)
		}
	}
	// The QoS and pod cgroups are reported with their ids alone.
	ids := map[string]bool{}
	for _, s := range got["container_memory_usage_bytes"] {
		ids[s.labels["id"]] = true
	}
	if !ids["/"] || !ids["/"+ctr] {
		t.Errorf("memory usage ids %v", ids)
	}
	if _, err := os.Stat(filepath.Join(root, "memory", "kubepods", "burstable")); err == nil {
		if find(t, got, "container_last_seen", map[string]string{"id": "/kubepods/burstable", "pod": ""}) != 1700000000 {
			t.Error("the QoS cgroup is not reported")
		}
	}
}

func TestCadvisorCollectorV2(t *testing.T) {
	root := t.TempDir()
	ctr := "kubepods/burstable/poduid1/" + containerID
	writeFiles(t, root, map[string]string{
		"cgroup.controllers":         "cpu memory io pids\n",
		ctr + "/cpu.stat":            "usage_usec 2500000\nuser_usec 1500000\nsystem_usec 1000000\nnr_periods 10\nnr_throttled 4\nthrottled_usec 500000\n",
		ctr + "/cpu.max":             "50000 100000\n",
		ctr + "/cpu.weight":          "100\n",
		ctr + "/memory.current":      "300000000\n",
		ctr + "/memory.stat":         "anon 150000000\nfile 100000000\nfile_mapped 5000\ninactive_file 60000000\npgfault 10\npgmajfault 1\nkernel 888\npgscan 5\npgsteal 4\nworkingset_refault_file 9\n",
		ctr + "/memory.max":          "max\n",
		ctr + "/memory.events":       "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n",
		ctr + "/memory.swap.current": "0\n",
		ctr + "/io.stat":             "254:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n",
		ctr + "/pids.current":        "3\n",
		ctr + "/pids.max":            "1024\n",
	})
	got := cadvisorScrape(t, machine.Cgroups{Mount: root, V2: true}, "/kubepods", cadvisorProc(t))
	app := map[string]string{"container": "app", "pod": "web", "id": "/" + ctr}
	dev := map[string]string{"container": "app", "device": "/dev/vda"}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"container_cpu_usage_seconds_total", app, 2.5},
		{"container_cpu_system_seconds_total", app, 1},
		{"container_cpu_cfs_throttled_periods_total", app, 4},
		{"container_cpu_cfs_throttled_seconds_total", app, 0.5},
		{"container_spec_cpu_quota", app, 50000},
		{"container_spec_cpu_shares", app, 2597}, // weight 100, through cadvisor's conversion 2 + (w-1)*262142/9999
		{"container_memory_working_set_bytes", app, 240000000},
		{"container_memory_rss", app, 150000000},
		{"container_memory_cache", app, 100000000},
		{"container_oom_events_total", app, 1},
		{"container_spec_memory_limit_bytes", app, 0},
		{"container_fs_writes_bytes_total", dev, 8192},
		{"container_fs_reads_total", dev, 1},
		{"container_threads", app, 3},
		{"container_threads_max", app, 1024},
		{"container_memory_kernel_usage", app, 888},
		{"container_memory_pgscan_total", app, 5},
		{"container_memory_pgsteal_total", app, 4},
		{"container_memory_workingset_refault_file_total", app, 9},
		{"container_memory_events_max_total", app, 3},
		{"container_blkio_device_usage_total", map[string]string{"container": "app", "operation": "Read"}, 4096},
	} {
		if v := find(t, got, tc.name, tc.labels); v != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, v, tc.want)
		}
	}
}

func TestCPUTopology(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, cpuinfo         string
		wantCores, wantSocket int
	}{
		{"two sockets, hyperthreads", "processor: 0\nphysical id: 0\ncore id: 0\nprocessor: 1\nphysical id: 0\ncore id: 0\nprocessor: 2\nphysical id: 1\ncore id: 0\nprocessor: 3\nphysical id: 1\ncore id: 1\n", 3, 2},
		{"no topology (a VM)", "processor: 0\nprocessor: 1\n", 2, 1},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.cpuinfo), 0o644); err != nil {
			t.Fatal(err)
		}
		cores, sockets, err := cpuTopology(p)
		if err != nil || cores != tc.wantCores || sockets != tc.wantSocket {
			t.Errorf("%s: %d cores, %d sockets, %v; want %d, %d", tc.name, cores, sockets, err, tc.wantCores, tc.wantSocket)
		}
	}
}
