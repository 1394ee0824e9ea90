package stats

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/machine"
)

// Pressure files as Linux 6.18 writes them (/proc/pressure and the root
// cgroup's are alike); cpu.pressure's "full" line is all zeros at the root.
const (
	cpuPressure    = "some avg10=1.68 avg60=1.36 avg300=2.08 total=4327818813\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
	memoryPressure = "some avg10=0.00 avg60=0.00 avg300=0.00 total=490649\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=315222\n"
	ioPressure     = "some avg10=0.00 avg60=0.10 avg300=0.09 total=122277405\nfull avg10=0.00 avg60=0.09 avg300=0.08 total=64004739\n"
)

func psiOf(some, full statsv1alpha1.PSIData) *statsv1alpha1.PSIStats {
	return &statsv1alpha1.PSIStats{Some: some, Full: full}
}

func TestParsePSI(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     *statsv1alpha1.PSIStats
		wantErr  string
	}{
		{"cpu", cpuPressure, psiOf(statsv1alpha1.PSIData{Total: 4327818813, Avg10: 1.68, Avg60: 1.36, Avg300: 2.08}, statsv1alpha1.PSIData{}), ""},
		{"memory", memoryPressure, psiOf(statsv1alpha1.PSIData{Total: 490649}, statsv1alpha1.PSIData{Total: 315222}), ""},
		{"io", ioPressure, psiOf(statsv1alpha1.PSIData{Total: 122277405, Avg60: 0.10, Avg300: 0.09}, statsv1alpha1.PSIData{Total: 64004739, Avg60: 0.09, Avg300: 0.08}), ""},
		{"cpu before Linux 5.13: no full line", "some avg10=0.50 avg60=0.25 avg300=0.10 total=1000\n",
			psiOf(statsv1alpha1.PSIData{Total: 1000, Avg10: 0.5, Avg60: 0.25, Avg300: 0.1}, statsv1alpha1.PSIData{}), ""},
		{"runc's test data, no trailing newline", "some avg10=1.71 avg60=2.36 avg300=2.57 total=230548833\nfull avg10=1.00 avg60=1.01 avg300=1.00 total=157622356",
			psiOf(statsv1alpha1.PSIData{Total: 230548833, Avg10: 1.71, Avg60: 2.36, Avg300: 2.57}, statsv1alpha1.PSIData{Total: 157622356, Avg10: 1, Avg60: 1.01, Avg300: 1}), ""},
		{"blank lines, unknown lines and keys are ignored", "\nwhat ever\nsome avg10=0.01 total=7 avg5=9\n\n",
			psiOf(statsv1alpha1.PSIData{Total: 7, Avg10: 0.01}, statsv1alpha1.PSIData{}), ""},
		{"empty", "", &statsv1alpha1.PSIStats{}, ""},
		{"a pair without =", "some avg10 total=1\n", nil, `invalid psi data: "avg10"`},
		{"a malformed total", "full total=-1\n", nil, "invalid total PSI value"},
		{"a malformed average", "some avg60=x\n", nil, "invalid avg60 PSI value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePSI(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReadPSI(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"cpu.pressure": cpuPressure, "bad.pressure": "some total=x\n"})
	if p, err := readPSI(filepath.Join(dir, "cpu.pressure")); err != nil || p == nil || p.Some.Total != 4327818813 {
		t.Errorf("cpu.pressure = %+v, %v", p, err)
	}
	// No file (cgroup v1, a kernel without PSI): none, no error, as runc.
	if p, err := readPSI(filepath.Join(dir, "memory.pressure")); p != nil || err != nil {
		t.Errorf("missing file = %+v, %v; want nil, nil", p, err)
	}
	if _, err := readPSI(filepath.Join(dir, "bad.pressure")); err == nil || !strings.Contains(err.Error(), "bad.pressure") {
		t.Errorf("malformed file: err = %v", err)
	}
}

func TestIndexPodCgroups(t *testing.T) {
	const uid = "0f5a2c3e-1111-2222-3333-444455556666"
	for _, tc := range []struct {
		name           string
		ids            []string
		wantPod, wantC string
	}{
		{
			name:    "cgroupfs",
			ids:     []string{"/kubepods", "/kubepods/burstable", "/kubepods/burstable/pod" + uid, "/kubepods/burstable/pod" + uid + "/" + containerID},
			wantPod: "/kubepods/burstable/pod" + uid, wantC: "/kubepods/burstable/pod" + uid + "/" + containerID,
		},
		{
			name: "systemd, CRI-O's conmon scope left out",
			ids: []string{"/kubepods.slice", "/kubepods.slice/kubepods-pod0f5a2c3e_1111_2222_3333_444455556666.slice",
				"/kubepods.slice/kubepods-pod0f5a2c3e_1111_2222_3333_444455556666.slice/crio-conmon-" + containerID + ".scope",
				"/kubepods.slice/kubepods-pod0f5a2c3e_1111_2222_3333_444455556666.slice/crio-" + containerID + ".scope"},
			wantPod: "/kubepods.slice/kubepods-pod0f5a2c3e_1111_2222_3333_444455556666.slice",
			wantC:   "/kubepods.slice/kubepods-pod0f5a2c3e_1111_2222_3333_444455556666.slice/crio-" + containerID + ".scope",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := indexPodCgroups(tc.ids)
			if got.byUID[uid] != tc.wantPod || got.byID[containerID] != tc.wantC || len(got.byUID) != 1 || len(got.byID) != 1 {
				t.Errorf("got %+v", got)
			}
		})
	}
}

// TestSummaryPSI checks the PSI of the node, the pods' system container,
// a pod and its container, on fake cgroup trees.
func TestSummaryPSI(t *testing.T) {
	const uid = "0f5a2c3e-1111-2222-3333-444455556666"
	now := time.Unix(1700000000, 0)
	cpuPSI := psiOf(statsv1alpha1.PSIData{Total: 4327818813, Avg10: 1.68, Avg60: 1.36, Avg300: 2.08}, statsv1alpha1.PSIData{})
	memPSI := psiOf(statsv1alpha1.PSIData{Total: 490649}, statsv1alpha1.PSIData{Total: 315222})
	ioPSI := psiOf(statsv1alpha1.PSIData{Total: 122277405, Avg60: 0.10, Avg300: 0.09}, statsv1alpha1.PSIData{Total: 64004739, Avg60: 0.09, Avg300: 0.08})
	v2Tree := func(pod, ctr string, withPSI bool) map[string]string {
		files := map[string]string{
			"cgroup.controllers":      "cpu memory io pids\n",
			"cpu.stat":                "usage_usec 2500\n",
			"memory.stat":             "anon 4096\n",
			"kubepods/memory.current": "1000\n",
			"kubepods/memory.stat":    "inactive_file 0\n",
			ctr + "/cgroup.procs":     "",
		}
		if withPSI {
			for _, f := range []map[string]string{
				pressureFilesOf("", cpuPressure, memoryPressure, ioPressure),
				pressureFilesOf("kubepods/", "", "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=4\n", ""),
				pressureFilesOf(pod+"/", "some avg10=0.00 avg60=0.00 avg300=0.00 total=11\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=10\n",
					"some avg10=0.00 avg60=0.00 avg300=0.00 total=21\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=20\n",
					"some avg10=0.00 avg60=0.00 avg300=0.00 total=31\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=30\n"),
				pressureFilesOf(ctr+"/", "some avg10=0.10 avg60=0.00 avg300=0.00 total=12\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
					"some avg10=0.00 avg60=0.00 avg300=0.00 total=22\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
					"some avg10=0.00 avg60=0.00 avg300=0.00 total=32\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"),
			} {
				for k, v := range f {
					files[k] = v
				}
			}
		}
		return files
	}
	some := func(total uint64) *statsv1alpha1.PSIStats {
		return psiOf(statsv1alpha1.PSIData{Total: total}, statsv1alpha1.PSIData{Total: total - 1})
	}
	zero := &statsv1alpha1.PSIStats{}
	criPsi := &runtimeapi.PsiStats{Some: &runtimeapi.PsiData{Total: 99, Avg10: 1.5}}
	fromCRI := psiOf(statsv1alpha1.PSIData{Total: 99, Avg10: 1.5}, statsv1alpha1.PSIData{})

	type want struct {
		node          [3]*statsv1alpha1.PSIStats // cpu, memory, io
		podsContainer *statsv1alpha1.PSIStats    // memory
		pod, ctr      [3]*statsv1alpha1.PSIStats
	}
	for _, tc := range []struct {
		name       string
		v2         bool
		files      map[string]string
		podsCgroup string
		runtimePSI bool
		want       want
	}{
		{
			name: "v2, cgroupfs names", v2: true, podsCgroup: "/kubepods",
			files: v2Tree("kubepods/burstable/pod"+uid, "kubepods/burstable/pod"+uid+"/"+containerID, true),
			want: want{node: [3]*statsv1alpha1.PSIStats{cpuPSI, memPSI, ioPSI}, podsContainer: some(5),
				pod: [3]*statsv1alpha1.PSIStats{some(11), some(21), some(31)},
				ctr: [3]*statsv1alpha1.PSIStats{psiOf(statsv1alpha1.PSIData{Total: 12, Avg10: 0.1}, statsv1alpha1.PSIData{}),
					psiOf(statsv1alpha1.PSIData{Total: 22}, statsv1alpha1.PSIData{}), psiOf(statsv1alpha1.PSIData{Total: 32}, statsv1alpha1.PSIData{})}},
		},
		{
			name: "v2, systemd names; the cgroups win over the runtime's PSI", v2: true, podsCgroup: "/kubepods", runtimePSI: true,
			files: v2Tree("kubepods/kubepods-burstable.slice/kubepods-burstable-pod0f5a2c3e_1111_2222_3333_444455556666.slice",
				"kubepods/kubepods-burstable.slice/kubepods-burstable-pod0f5a2c3e_1111_2222_3333_444455556666.slice/cri-containerd-"+containerID+".scope", true),
			want: want{node: [3]*statsv1alpha1.PSIStats{cpuPSI, memPSI, ioPSI}, podsContainer: some(5),
				pod: [3]*statsv1alpha1.PSIStats{some(11), some(21), some(31)},
				ctr: [3]*statsv1alpha1.PSIStats{psiOf(statsv1alpha1.PSIData{Total: 12, Avg10: 0.1}, statsv1alpha1.PSIData{}),
					psiOf(statsv1alpha1.PSIData{Total: 22}, statsv1alpha1.PSIData{}), psiOf(statsv1alpha1.PSIData{Total: 32}, statsv1alpha1.PSIData{})}},
		},
		{
			name: "v2, a kernel without PSI: zero, as upstream's cadvisor figures", v2: true, podsCgroup: "/kubepods",
			files: v2Tree("kubepods/burstable/pod"+uid, "kubepods/burstable/pod"+uid+"/"+containerID, false),
			want:  want{node: [3]*statsv1alpha1.PSIStats{zero, zero, zero}, podsContainer: zero, pod: [3]*statsv1alpha1.PSIStats{zero, zero, zero}, ctr: [3]*statsv1alpha1.PSIStats{zero, zero, zero}},
		},
		{
			name: "v1: zero, as upstream's cadvisor figures", podsCgroup: "/kubepods",
			files: map[string]string{
				"cpuacct/cpuacct.usage":                 "42\n",
				"memory/memory.usage_in_bytes":          "1000\n",
				"memory/memory.stat":                    "total_inactive_file 0\n",
				"blkio/blkio.throttle.io_serviced":      "",
				"memory/kubepods/memory.usage_in_bytes": "100\n",
				"memory/kubepods/memory.stat":           "total_inactive_file 0\n",
				"memory/kubepods/burstable/pod" + uid + "/" + containerID + "/cgroup.procs": "",
			},
			want: want{node: [3]*statsv1alpha1.PSIStats{zero, zero, zero}, podsContainer: zero, pod: [3]*statsv1alpha1.PSIStats{zero, zero, zero}, ctr: [3]*statsv1alpha1.PSIStats{zero, zero, zero}},
		},
		{
			name: "no pods' cgroup: the runtime's PSI", v2: true, runtimePSI: true,
			files: v2Tree("kubepods/burstable/pod"+uid, "kubepods/burstable/pod"+uid+"/"+containerID, true),
			want: want{node: [3]*statsv1alpha1.PSIStats{cpuPSI, memPSI, ioPSI},
				pod: [3]*statsv1alpha1.PSIStats{fromCRI, fromCRI, fromCRI}, ctr: [3]*statsv1alpha1.PSIStats{fromCRI, fromCRI, fromCRI}},
		},
		{
			name: "no pods' cgroup, no PSI from the runtime", v2: true,
			files: v2Tree("kubepods/burstable/pod"+uid, "kubepods/burstable/pod"+uid+"/"+containerID, true),
			want:  want{node: [3]*statsv1alpha1.PSIStats{cpuPSI, memPSI, ioPSI}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tc.files)
			cpu, mem := cpuAt(now, now.Add(-time.Minute), 0.5), memUsage(now, 10*mi, 5*mi)
			var io *runtimeapi.IoUsage
			if tc.runtimePSI {
				cpu.Psi, mem.Psi = criPsi, criPsi
				io = &runtimeapi.IoUsage{Timestamp: now.UnixNano(), Psi: criPsi}
			}
			rt := &fakeRuntime{
				sandboxes:  []*runtimeapi.PodSandbox{sandbox(sandboxID, "ns", "web", uid, true, now.Add(-time.Minute))},
				containers: []*runtimeapi.Container{container(containerID, sandboxID, "app", true, now.Add(-time.Minute))},
			}
			rt.sandboxStats = func() ([]*runtimeapi.PodSandboxStats, error) {
				ctr := &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{Id: containerID}, Cpu: cpu, Memory: mem, Io: io}
				return []*runtimeapi.PodSandboxStats{{
					Attributes: &runtimeapi.PodSandboxAttributes{Id: sandboxID},
					Linux:      &runtimeapi.LinuxPodSandboxStats{Cpu: cpu, Memory: mem, Io: io, Containers: []*runtimeapi.ContainerStats{ctr}},
				}}, nil
			}
			p := newProvider(t, Config{
				Runtime: rt, Clock: newFakeClock(now), ProcRoot: procFixture(t), PodsCgroup: tc.podsCgroup,
				Machine: machine.Facts{MemoryCapacity: 1 << 30, Cgroups: machine.Cgroups{Mount: root, V2: tc.v2}},
			})
			s, err := p.Summary(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, got, want *statsv1alpha1.PSIStats) {
				t.Helper()
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s PSI = %+v, want %+v", what, got, want)
				}
			}
			n := s.Node
			if n.CPU == nil || n.Memory == nil || n.IO == nil {
				t.Fatalf("node cpu %+v, memory %+v, io %+v", n.CPU, n.Memory, n.IO)
			}
			check("node cpu", n.CPU.PSI, tc.want.node[0])
			check("node memory", n.Memory.PSI, tc.want.node[1])
			check("node io", n.IO.PSI, tc.want.node[2])
			if tc.podsCgroup != "" {
				if len(n.SystemContainers) != 1 {
					t.Fatalf("system containers %+v", n.SystemContainers)
				}
				check("pods container memory", n.SystemContainers[0].Memory.PSI, tc.want.podsContainer)
			}
			if len(s.Pods) != 1 || len(s.Pods[0].Containers) != 1 {
				t.Fatalf("pods %+v", s.Pods)
			}
			pod, c := s.Pods[0], s.Pods[0].Containers[0]
			check("pod cpu", pod.CPU.PSI, tc.want.pod[0])
			check("pod memory", pod.Memory.PSI, tc.want.pod[1])
			check("container cpu", c.CPU.PSI, tc.want.ctr[0])
			check("container memory", c.Memory.PSI, tc.want.ctr[1])
			// Upstream's container always has IO; a pod has it from its
			// cgroup or the runtime.
			if c.IO == nil {
				t.Fatal("container: no io")
			}
			check("container io", c.IO.PSI, tc.want.ctr[2])
			if tc.want.pod[2] == nil {
				if pod.IO != nil {
					t.Errorf("pod io = %+v, want none", pod.IO)
				}
			} else if pod.IO == nil {
				t.Error("pod: no io")
			} else {
				check("pod io", pod.IO.PSI, tc.want.pod[2])
			}
		})
	}
}

// TestCadvisorPressure checks cadvisor's PSI families: on v2 where the
// kernel has PSI, per cgroup, in seconds; none without.
func TestCadvisorPressure(t *testing.T) {
	ctr := "kubepods/burstable/poduid1/" + containerID
	t.Run("v2", func(t *testing.T) {
		root := t.TempDir()
		files := map[string]string{"cgroup.controllers": "cpu memory io pids\n", ctr + "/cpu.stat": "usage_usec 1\n"}
		for k, v := range pressureFilesOf("", cpuPressure, memoryPressure, ioPressure) {
			files[k] = v
		}
		// The container's cpu.pressure as before Linux 5.13 (no "full"),
		// no io.pressure (PSI off for it): left out.
		files[ctr+"/cpu.pressure"] = "some avg10=0.00 avg60=0.00 avg300=0.00 total=2500000\n"
		files[ctr+"/memory.pressure"] = "some avg10=0.00 avg60=0.00 avg300=0.00 total=1500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=500000\n"
		writeFiles(t, root, files)
		got := cadvisorScrape(t, machine.Cgroups{Mount: root, V2: true}, "/kubepods", cadvisorProc(t))
		app := map[string]string{"container": "app", "pod": "web", "namespace": "ns", "id": "/" + ctr}
		node := map[string]string{"id": "/", "container": "", "pod": ""}
		for _, tc := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"container_pressure_cpu_waiting_seconds_total", node, 4327.818813},
			{"container_pressure_cpu_stalled_seconds_total", node, 0},
			{"container_pressure_memory_waiting_seconds_total", node, 0.490649},
			{"container_pressure_memory_stalled_seconds_total", node, 0.315222},
			{"container_pressure_io_waiting_seconds_total", node, 122.277405},
			{"container_pressure_io_stalled_seconds_total", node, 64.004739},
			{"container_pressure_cpu_waiting_seconds_total", app, 2.5},
			{"container_pressure_cpu_stalled_seconds_total", app, 0},
			{"container_pressure_memory_waiting_seconds_total", app, 1.5},
			{"container_pressure_memory_stalled_seconds_total", app, 0.5},
		} {
			if v := find(t, got, tc.name, tc.labels); v != tc.want {
				t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, v, tc.want)
			}
		}
		for _, s := range got["container_pressure_io_waiting_seconds_total"] {
			if s.labels["id"] == "/"+ctr {
				t.Errorf("io pressure for a cgroup without io.pressure: %v", s)
			}
		}
	})
	for _, tc := range []struct {
		name string
		cg   func(root string) machine.Cgroups
		file map[string]string
	}{
		// The root has no cpu.pressure: upstream leaves cadvisor's
		// pressure metrics out, even where a cgroup has the files.
		{"v2 without PSI", func(root string) machine.Cgroups { return machine.Cgroups{Mount: root, V2: true} },
			map[string]string{"cgroup.controllers": "cpu\n", ctr + "/cpu.stat": "usage_usec 1\n", ctr + "/cpu.pressure": cpuPressure}},
		// Hybrid: the unified hierarchy has pressure files, the kubelet
		// does not look there.
		{"v1", func(root string) machine.Cgroups { return machine.Cgroups{Mount: root} },
			map[string]string{"cpuacct/cpuacct.usage": "1\n", "unified/cpu.pressure": cpuPressure, "cpuacct/" + ctr + "/cpuacct.usage": "1\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tc.file)
			got := cadvisorScrape(t, tc.cg(root), "/kubepods", cadvisorProc(t))
			for name := range got {
				if strings.HasPrefix(name, "container_pressure_") {
					t.Errorf("%s served: %v", name, got[name])
				}
			}
			if _, ok := got["container_last_seen"]; !ok {
				t.Error("no container_last_seen: the scrape reported nothing")
			}
		})
	}
}

func pressureFilesOf(dir, cpu, mem, io string) map[string]string {
	return map[string]string{dir + "cpu.pressure": cpu, dir + "memory.pressure": mem, dir + "io.pressure": io}
}
