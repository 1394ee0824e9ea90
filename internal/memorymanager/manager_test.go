package memorymanager

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/memorymanager/state"
	"github.com/nodelet/nodelet/internal/topologymanager"
)

const gi = uint64(1) << 30

func guaranteed(uid, mem string, names ...string) *v1.Pod {
	p := &v1.Pod{}
	p.UID, p.Name, p.Namespace = types.UID(uid), uid, "ns"
	for _, n := range names {
		r := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse(mem)}
		c := v1.Container{Name: n, Resources: v1.ResourceRequirements{Requests: r, Limits: r}}
		if strings.HasPrefix(n, "init") {
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		} else {
			p.Spec.Containers = append(p.Spec.Containers, c)
		}
	}
	return p
}

// newManager: NUMA nodes of 3Gi each with 1Gi reserved on node 0 (so
// node 0 has 2Gi allocatable, the others 3Gi).
func newManager(t *testing.T, nodes int, active *[]*v1.Pod) *Manager {
	t.Helper()
	var ns []NUMANode
	for i := range nodes {
		ns = append(ns, NUMANode{ID: i, Memory: 3 * gi, HugePages: []HugePages{{PageSize: 2048}}})
	}
	m, err := New(Config{Policy: PolicyStatic, Nodes: ns, Dir: t.TempDir(),
		NodeReservation: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourceCPU: resource.MustParse("1")},
		ReservedMemory:  []kubeletv1beta1.MemoryReservation{{NumaNode: 0, Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}}},
		ActivePods:      func() []*v1.Pod { return *active }, SourcesReady: func() bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// admit admits p through the topology manager (none policy unless a
// policy is given) with m its only provider, releasing what a refused pod
// got (as the admission chain's hook does).
func admit(t *testing.T, m *Manager, active *[]*v1.Pod, p *v1.Pod, policy ...string) admission.Result {
	t.Helper()
	cfg := topologymanager.Config{Providers: []topologymanager.Provider{m}, NUMA: &topologymanager.NUMAInfo{}}
	for id := range m.state.Machine {
		cfg.NUMA.Nodes = append(cfg.NUMA.Nodes, id)
	}
	slices.Sort(cfg.NUMA.Nodes)
	if len(policy) > 0 {
		cfg.Policy = policy[0]
	}
	tm, err := topologymanager.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := tm.Admit(context.Background(), admission.Attributes{Pod: p})
	if r.Admit {
		*active = append(*active, p)
	} else {
		m.Release(context.Background(), string(p.UID))
	}
	return r
}

func free(m *Manager, id int) uint64 { return m.state.Machine[id].MemoryMap[v1.ResourceMemory].Free }

func TestAdmitPinsToTheFewestNodes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes int
		pods  []*v1.Pod
		want  []string // cpuset.mems of each pod's container "app", "" refused
	}{
		{name: "one node", nodes: 1, pods: []*v1.Pod{guaranteed("a", "1Gi", "app")}, want: []string{"0"}},
		{name: "more than a node holds: refused", nodes: 1, pods: []*v1.Pod{guaranteed("a", "3Gi", "app")}, want: []string{""}},
		{name: "the first node that holds it", nodes: 2, pods: []*v1.Pod{guaranteed("a", "1Gi", "app"), guaranteed("b", "1536Mi", "app")}, want: []string{"0", "1"}},
		{name: "more than any node: a group of two", nodes: 2, pods: []*v1.Pod{guaranteed("a", "4Gi", "app")}, want: []string{"0-1"}},
		{name: "a grouped node takes no single-node pod", nodes: 3, pods: []*v1.Pod{guaranteed("a", "4Gi", "app"), guaranteed("b", "512Mi", "app")}, want: []string{"0-1", "2"}},
		{name: "the group's rest, when no single node is left", nodes: 2, pods: []*v1.Pod{guaranteed("a", "4Gi", "app"), guaranteed("b", "512Mi", "app")}, want: []string{"0-1", "0-1"}},
		{name: "a node used alone joins no group", nodes: 2, pods: []*v1.Pod{guaranteed("a", "1Gi", "app"), guaranteed("b", "4Gi", "app")}, want: []string{"0", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var active []*v1.Pod
			m := newManager(t, tc.nodes, &active)
			for i, p := range tc.pods {
				r := admit(t, m, &active, p)
				if tc.want[i] == "" {
					if r.Admit || r.Reason != "UnexpectedAdmissionError" || !strings.HasPrefix(r.Message, "Allocate failed due to [memorymanager]") {
						t.Errorf("pod %s: %+v, want refused", p.Name, r)
					}
					if len(m.state.Assignments[string(p.UID)]) != 0 {
						t.Errorf("refused pod %s kept %v", p.Name, m.state.Assignments[string(p.UID)])
					}
					continue
				}
				if !r.Admit {
					t.Fatalf("pod %s refused: %s", p.Name, r.Message)
				}
				if got := m.ContainerMems(context.Background(), p, "app"); got != tc.want[i] {
					t.Errorf("pod %s: cpuset.mems %q, want %q", p.Name, got, tc.want[i])
				}
			}
		})
	}
}

func TestNotGuaranteedIsNotPinned(t *testing.T) {
	var active []*v1.Pod
	m := newManager(t, 1, &active)
	p := guaranteed("a", "1Gi", "app")
	p.Spec.Containers[0].Resources.Limits = nil // Burstable
	if r := admit(t, m, &active, p); !r.Admit || m.ContainerMems(context.Background(), p, "app") != "" || free(m, 0) != 2*gi {
		t.Errorf("Burstable pod: %+v, mems %q, free %d", r, m.ContainerMems(context.Background(), p, "app"), free(m, 0))
	}
}

// TestInitContainersMemoryIsReused: upstream's reusable memory: the app
// container takes what the init container leaves; once the app starts,
// the init container's (emptied) block is gone.
func TestInitContainersMemoryIsReused(t *testing.T) {
	var active []*v1.Pod
	m := newManager(t, 1, &active)
	p := guaranteed("a", "1536Mi", "init", "app")
	if r := admit(t, m, &active, p); !r.Admit {
		t.Fatal(r.Message)
	}
	if got := free(m, 0); got != 512<<20 {
		t.Errorf("free after admission %d, want 512Mi (init and app share 1.5Gi)", got)
	}
	if b := m.Memory("a", "init"); len(b) != 1 || b[0].Size != 0 {
		t.Errorf("init block %+v, want its size reused by app (0)", b)
	}
	if got := m.ContainerMems(context.Background(), p, "app"); got != "0" || m.Memory("a", "init") != nil {
		t.Errorf("app mems %q, init blocks %v after the app started", got, m.Memory("a", "init"))
	}
	if got := free(m, 0); got != 512<<20 {
		t.Errorf("free after the init container ended %d, want 512Mi", got)
	}
}

// TestReleaseAndStaleGiveMemoryBack: a refused pod's memory and that of
// a pod no longer active go back to their nodes, which leave their group.
func TestReleaseAndStaleGiveMemoryBack(t *testing.T) {
	var active []*v1.Pod
	m := newManager(t, 2, &active)
	a, b := guaranteed("a", "1Gi", "app"), guaranteed("b", "4Gi", "app")
	admit(t, m, &active, a)
	m.Release(context.Background(), "a")
	if free(m, 0) != 2*gi || m.state.Machine[0].NumberOfAssignments != 0 {
		t.Errorf("after Release: %+v", m.state.Machine[0])
	}
	active = nil
	admit(t, m, &active, b)
	m.removeStale(context.Background(), active) // b seen active: no longer only admitted
	active = nil                                // b finished
	m.removeStale(context.Background(), active)
	if free(m, 0) != 2*gi || free(m, 1) != 3*gi || !slices.Equal(m.state.Machine[1].Cells, []int{1}) {
		t.Errorf("after removeStale: %+v %+v", m.state.Machine[0], m.state.Machine[1])
	}
}

// TestRestartKeepsAndValidatesTheState: the checkpoint restores the
// assignments; a changed reservation refuses to start as upstream.
func TestRestartKeepsAndValidatesTheState(t *testing.T) {
	var active []*v1.Pod
	m := newManager(t, 2, &active)
	admit(t, m, &active, guaranteed("a", "4Gi", "app"))
	nodes := []NUMANode{{ID: 0, Memory: 3 * gi, HugePages: []HugePages{{PageSize: 2048}}}, {ID: 1, Memory: 3 * gi, HugePages: []HugePages{{PageSize: 2048}}}}
	cfg := Config{Policy: PolicyStatic, Nodes: nodes, Dir: m.cfg.Dir,
		NodeReservation: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")},
		ReservedMemory:  []kubeletv1beta1.MemoryReservation{{NumaNode: 0, Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}}},
		ActivePods:      func() []*v1.Pod { return active }, SourcesReady: func() bool { return true }}
	again, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.ContainerMems(context.Background(), active[0], "app"); got != "0-1" {
		t.Errorf("after a restart: mems %q", got)
	}
	cfg.ReservedMemory = []kubeletv1beta1.MemoryReservation{{NumaNode: 1, Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}}}
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "the expected machine state is different from the real one") {
		t.Errorf("a moved reservation: %v", err)
	}
	cfg.Policy = PolicyNone
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), `configured policy "None" differs from state checkpoint policy "Static"`) {
		t.Errorf("another policy: %v", err)
	}
	_ = os.Remove(filepath.Join(cfg.Dir, state.FileName))
}

func TestReservation(t *testing.T) {
	nodes := []NUMANode{{ID: 0, Memory: 4 * gi}}
	mem := func(s string) v1.ResourceList { return v1.ResourceList{v1.ResourceMemory: resource.MustParse(s)} }
	for _, tc := range []struct {
		name     string
		node     v1.ResourceList
		reserved []kubeletv1beta1.MemoryReservation
		wantErr  string
	}{
		{name: "equal", node: mem("1100Mi"), reserved: []kubeletv1beta1.MemoryReservation{{NumaNode: 0, Limits: mem("1100Mi")}}},
		{name: "not equal", node: mem("1100Mi"), reserved: []kubeletv1beta1.MemoryReservation{{NumaNode: 0, Limits: mem("1Gi")}},
			wantErr: `the total amount "1Gi" of type "memory" is not equal to the value "1100Mi" determined by Node Allocatable feature`},
		{name: "no such node", node: mem("1Gi"), reserved: []kubeletv1beta1.MemoryReservation{{NumaNode: 3, Limits: mem("1Gi")}},
			wantErr: "references a NUMA node 3 that does not exist on this machine"},
		{name: "none", wantErr: "[memorymanager] you should specify the system reserved memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := reservation(nodes, tc.node, tc.reserved)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("reservation: %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestDiscover(t *testing.T) {
	root := t.TempDir()
	for id, kb := range []string{"4000000", "2000000"} {
		dir := filepath.Join(root, "sys/devices/system/node", "node"+string(rune('0'+id)))
		must(t, os.MkdirAll(filepath.Join(dir, "hugepages/hugepages-2048kB"), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "meminfo"), []byte("Node "+string(rune('0'+id))+" MemTotal:       "+kb+" kB\nNode 0 MemFree: 1 kB\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, "hugepages/hugepages-2048kB/nr_hugepages"), []byte("4\n"), 0o644))
	}
	nodes, err := Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[1].ID != 1 || nodes[1].Memory != 2000000*1024 || len(nodes[0].HugePages) != 1 || nodes[0].HugePages[0] != (HugePages{PageSize: 2048, Pages: 4}) {
		t.Errorf("Discover = %+v", nodes)
	}
	ms := defaultMachineState(nodes, reservedMemory{0: {v1.ResourceMemory: gi}})
	if got := ms[0].MemoryMap[v1.ResourceMemory].Allocatable; got != 4000000*1024-gi-8<<20 {
		t.Errorf("node 0 allocatable %d: total less reserved less huge pages", got)
	}
	if got := ms[0].MemoryMap["hugepages-2Mi"].Allocatable; got != 8<<20 {
		t.Errorf("node 0 hugepages-2Mi allocatable %d", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestUnderTopologyPolicies: the memory hints merged by the topology
// manager: single-numa-node refuses a pod no single node holds
// (TopologyAffinityError), restricted admits it on the two nodes it needs.
func TestUnderTopologyPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy, mem, want string
	}{
		{topologymanager.PolicySingleNumaNode, "1Gi", "0"},
		{topologymanager.PolicySingleNumaNode, "4Gi", ""},
		{topologymanager.PolicyRestricted, "4Gi", "0-1"},
		{topologymanager.PolicyBestEffort, "2560Mi", "1"},
	} {
		t.Run(tc.policy+"/"+tc.mem, func(t *testing.T) {
			var active []*v1.Pod
			m := newManager(t, 2, &active)
			p := guaranteed("a", tc.mem, "app")
			r := admit(t, m, &active, p, tc.policy)
			if tc.want == "" {
				if r.Admit || r.Reason != "TopologyAffinityError" || r.Message != "Resources cannot be allocated with Topology locality" {
					t.Errorf("admitted %+v, want TopologyAffinityError", r)
				}
				return
			}
			if !r.Admit {
				t.Fatalf("refused: %+v", r)
			}
			if got := m.ContainerMems(context.Background(), p, "app"); got != tc.want {
				t.Errorf("cpuset.mems %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTopologyHints(t *testing.T) {
	var active []*v1.Pod
	m := newManager(t, 2, &active)
	p := guaranteed("a", "2560Mi", "app")
	got := m.TopologyHints(context.Background(), p, &p.Spec.Containers[0])
	var s []string
	for _, h := range got["memory"] {
		s = append(s, h.String())
	}
	// Node 0 has 2Gi allocatable, node 1 3Gi: only node 1 alone.
	if strings.Join(s, " ") != "{10 true} {11 false}" {
		t.Errorf("hints %v", s)
	}
	admit(t, m, &active, p)
	again := m.TopologyHints(context.Background(), p, &p.Spec.Containers[0])
	if hs := again["memory"]; len(hs) != 1 || hs[0].NUMANodeAffinity.Bits()[0] != 1 || !hs[0].Preferred {
		t.Errorf("hints of an allocated container %v, want its own node", again)
	}
	pp := guaranteed("b", "512Mi", "init", "app")
	// 512Mi (init and app at different times) on either node; not on
	// both: node 1 is used alone.
	if hs := m.PodTopologyHints(context.Background(), pp)["memory"]; len(hs) != 2 || !hs[0].Preferred || !hs[1].Preferred {
		t.Errorf("pod hints %v", hs)
	}
}
