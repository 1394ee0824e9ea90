package stats

import (
	"context"
	"reflect"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/machine"
)

func TestReadCgroupAt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v2      bool
		files   map[string]string
		want    cgroupSample
		wantErr bool
	}{
		{
			name: "v2", v2: true,
			files: map[string]string{
				"kubelet.slice/cpu.stat":       "usage_usec 1500\nuser_usec 1000\n",
				"kubelet.slice/memory.current": "4096000\n",
				"kubelet.slice/memory.stat":    "anon 3000000\ninactive_file 96000\npgfault 7000\npgmajfault 3\n",
			},
			want: cgroupSample{hasCPU: true, cpuNanos: 1500000, hasMemory: true, usage: 4096000, workingSet: 4000000, rss: 3000000, pgfault: 7000, pgmajfault: 3},
		},
		{
			name: "v1: the cpuacct and memory hierarchies, total_ counters",
			files: map[string]string{
				"cpuacct/kubelet.slice/cpuacct.usage":        "99\n",
				"memory/kubelet.slice/memory.usage_in_bytes": "1000\n",
				"memory/kubelet.slice/memory.stat":           "rss 1\ntotal_rss 600\ntotal_inactive_file 200\ntotal_pgfault 40\ntotal_pgmajfault 4\n",
			},
			want: cgroupSample{hasCPU: true, cpuNanos: 99, hasMemory: true, usage: 1000, workingSet: 800, rss: 600, pgfault: 40, pgmajfault: 4},
		},
		{name: "v2, no such cgroup", v2: true, files: map[string]string{"other/cpu.stat": "usage_usec 1\n"}, wantErr: true},
		{name: "v1, no such cgroup", files: map[string]string{"memory/other/memory.usage_in_bytes": "1\n"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tc.files)
			got, err := readCgroupAt(machine.Cgroups{Mount: root, V2: tc.v2}, "/kubelet.slice")
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// The node's system containers as upstream's summary has them: kubelet,
// runtime and pods, each with CPU (its rate from the second sample on) and
// memory with RSS and page faults; pods with its available memory.
func TestSystemContainers(t *testing.T) {
	now := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	started := now.Add(-time.Hour)
	root := t.TempDir()
	files := map[string]string{"cpu.stat": "usage_usec 1\n", "memory.stat": "anon 1\n"}
	for _, cg := range []string{"kubelet.slice", "system.slice/containerd.service", "kubepods"} {
		files[cg+"/cpu.stat"] = "usage_usec 2000000\n"
		files[cg+"/memory.current"] = "50000000\n"
		files[cg+"/memory.stat"] = "anon 30000000\ninactive_file 10000000\npgfault 5000\npgmajfault 2\n"
		files[cg+"/memory.max"] = "max\n"
	}
	writeFiles(t, root, files)
	clk := newFakeClock(now)
	p := newProvider(t, Config{
		Runtime: &fakeRuntime{sandboxStats: func() ([]*runtimeapi.PodSandboxStats, error) { return nil, nil }}, Clock: clk, ProcRoot: procFixture(t), PodsCgroup: "/kubepods", KubeletStart: started,
		Machine: machine.Facts{MemoryCapacity: 1 << 30, Cgroups: machine.Cgroups{Mount: root, V2: true}},
		SystemContainers: []SystemContainer{
			{Name: statsv1alpha1.SystemContainerKubelet, Cgroup: "/kubelet.slice", Start: started},
			{Name: statsv1alpha1.SystemContainerRuntime, Cgroup: "/system.slice/containerd.service"},
			{Name: "absent", Cgroup: "/nowhere"},
		},
	})
	if _, err := p.Summary(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A second sample a second later: 0.5 s of CPU each.
	clk.Step(time.Second)
	for _, cg := range []string{"kubelet.slice", "system.slice/containerd.service", "kubepods"} {
		writeFiles(t, root, map[string]string{cg + "/cpu.stat": "usage_usec 2500000\n"})
	}
	s, err := p.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]statsv1alpha1.ContainerStats{}
	for _, c := range s.Node.SystemContainers {
		got[c.Name] = c
	}
	if len(got) != 3 {
		t.Fatalf("system containers %v, want kubelet, runtime and pods (an absent cgroup left out)", got)
	}
	for _, name := range []string{statsv1alpha1.SystemContainerKubelet, statsv1alpha1.SystemContainerRuntime, statsv1alpha1.SystemContainerPods} {
		c, ok := got[name]
		if !ok {
			t.Fatalf("no %s system container", name)
		}
		if c.CPU == nil || *c.CPU.UsageCoreNanoSeconds != 2500000000 || c.CPU.UsageNanoCores == nil || *c.CPU.UsageNanoCores != 500000000 || c.CPU.PSI == nil {
			t.Errorf("%s cpu %+v", name, c.CPU)
		}
		m := c.Memory
		if m == nil || *m.UsageBytes != 50000000 || *m.WorkingSetBytes != 40000000 || *m.RSSBytes != 30000000 || *m.PageFaults != 5000 || *m.MajorPageFaults != 2 || m.PSI == nil {
			t.Errorf("%s memory %+v", name, m)
		}
		if c.StartTime.IsZero() || c.Rootfs != nil || c.Logs != nil {
			t.Errorf("%s start %v, rootfs %v, logs %v", name, c.StartTime, c.Rootfs, c.Logs)
		}
		if name == statsv1alpha1.SystemContainerPods {
			if m.AvailableBytes == nil || *m.AvailableBytes != 1<<30-40000000 {
				t.Errorf("pods available %v", m.AvailableBytes)
			}
		} else if m.AvailableBytes != nil {
			t.Errorf("%s: available memory %v on a container that is not limited", name, *m.AvailableBytes)
		}
	}
	if !got[statsv1alpha1.SystemContainerKubelet].StartTime.Time.Equal(started) {
		t.Errorf("kubelet start %v, want %v", got[statsv1alpha1.SystemContainerKubelet].StartTime, started)
	}
}
