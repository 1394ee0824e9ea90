package cpumanager

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/bitmask"
	"github.com/nodelet/nodelet/internal/topologymanager"
)

func hintsString(hs []topologymanager.TopologyHint) string {
	out := ""
	for _, h := range hs {
		out += fmt.Sprintf("%v/%t ", h.NUMANodeAffinity.Bits(), h.Preferred)
	}
	return out
}

// TestTopologyHints: upstream's generateCPUTopologyHints on two NUMA
// nodes of six CPUs (CPU 0 reserved): the sets that can hold the request
// with the free CPUs, preferred when as narrow as the machine allows.
func TestTopologyHints(t *testing.T) {
	for _, tc := range []struct {
		name string
		cpu  string
		want string
	}{
		{name: "one CPU: either node", cpu: "1", want: "[0]/true [1]/true [0 1]/false "},
		{name: "six CPUs: node 1 only, node 0 has its reserved CPU", cpu: "6", want: "[1]/true [0 1]/false "},
		{name: "seven CPUs: both", cpu: "7", want: "[0 1]/true "},
		{name: "twelve: more than free", cpu: "12", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, topoDualSocketHT, "", nil, "1")
			p := pod("g", nil, ctr("a", tc.cpu, "64Mi", true))
			got := e.m.TopologyHints(context.Background(), p, &p.Spec.Containers[0])
			if hs, ok := got[string(v1.ResourceCPU)]; !ok || hintsString(hs) != tc.want {
				t.Errorf("hints %v, want %q", got, tc.want)
			}
		})
	}
	e := newEnv(t, topoDualSocketHT, "", nil, "1")
	burstable := pod("b", nil, ctr("a", "1", "64Mi", false))
	if got := e.m.TopologyHints(context.Background(), burstable, &burstable.Spec.Containers[0]); got != nil {
		t.Errorf("a Burstable container has hints: %v", got)
	}
	// A pod: an init container of 4 and two app containers of 2 need 4
	// at once (upstream's podGuaranteedCPUs).
	p := pod("p", []v1.Container{ctr("init", "4", "64Mi", true)}, ctr("a", "2", "64Mi", true), ctr("b", "2", "64Mi", true))
	if got := hintsString(e.m.PodTopologyHints(context.Background(), p)[string(v1.ResourceCPU)]); got != "[0]/true [1]/true [0 1]/false " {
		t.Errorf("pod hints %q", got)
	}
}

// TestAllocateWithAffinity: the CPUs come from the affinity's NUMA node;
// the app container reuses the init container's there.
func TestAllocateWithAffinity(t *testing.T) {
	e := newEnv(t, topoDualSocketHT, "", nil, "1")
	one, _ := bitmask.New(1)
	p := pod("g", []v1.Container{ctr("init", "2", "64Mi", true)}, ctr("a", "2", "64Mi", true))
	for _, c := range []*v1.Container{&p.Spec.InitContainers[0], &p.Spec.Containers[0]} {
		if err := e.m.Allocate(context.Background(), p, c, topologymanager.TopologyHint{NUMANodeAffinity: one, Preferred: true}); err != nil {
			t.Fatal(err)
		}
	}
	init, app := e.m.Exclusive("g", "init"), e.m.Exclusive("g", "a")
	if got := e.m.cfg.Topology.CPUDetails.KeepOnly(init.Union(app)).NUMANodes().List(); fmt.Sprint(got) != "[1]" || !init.Equals(app) {
		t.Errorf("init on %s, app on %s: want the same CPUs of NUMA node 1", init, app)
	}
}
