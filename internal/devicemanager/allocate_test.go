package devicemanager

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodelet/nodelet/internal/bitmask"
	"github.com/nodelet/nodelet/internal/topologymanager"
)

func TestChoose(t *testing.T) {
	for _, tc := range []struct {
		name                                    string
		reusable, aligned, unaligned, available []string
		size                                    int
		preferred                               []string
		want                                    []string
		wantOK                                  bool
	}{
		{name: "in order", available: []string{"d3", "d1", "d2"}, size: 2, want: []string{"d1", "d2"}, wantOK: true},
		{name: "too few", available: []string{"d1"}, size: 2},
		{name: "none asked", available: []string{"d1"}, size: 0, wantOK: true},
		{name: "reused first", reusable: []string{"d9"}, available: []string{"d1", "d2"}, size: 2, want: []string{"d9", "d1"}, wantOK: true},
		{name: "reused only", reusable: []string{"d9", "d8"}, available: []string{"d1"}, size: 1, want: []string{"d8"}, wantOK: true},
		{name: "reused counts toward size", reusable: []string{"d9"}, available: []string{"d1"}, size: 2, want: []string{"d9", "d1"}, wantOK: true},
		{name: "preferred", available: []string{"d1", "d2", "d3"}, size: 2, preferred: []string{"d3"}, want: []string{"d3", "d1"}, wantOK: true},
		{name: "preferred not available ignored", available: []string{"d1", "d2"}, size: 1, preferred: []string{"d7"}, want: []string{"d1"}, wantOK: true},
		{name: "preferred after reused", reusable: []string{"d9"}, available: []string{"d1", "d2"}, size: 2, preferred: []string{"d9", "d2"}, want: []string{"d9", "d2"}, wantOK: true},
		// With a NUMA affinity (upstream's devicesToAllocate).
		{name: "more aligned than needed: the preferred aligned ones, then aligned", aligned: []string{"a1", "a2", "a3"}, unaligned: []string{"u1"}, size: 2,
			preferred: []string{"u1", "a3"}, want: []string{"a3", "a1"}, wantOK: true},
		{name: "fewer aligned: all of them, then preferred, then unaligned", aligned: []string{"a1"}, unaligned: []string{"u2", "u1"}, available: []string{"n1"}, size: 3,
			preferred: []string{"n1"}, want: []string{"a1", "n1", "u1"}, wantOK: true},
		{name: "unaligned before those without a node", unaligned: []string{"u1"}, available: []string{"n1"}, size: 2, want: []string{"u1", "n1"}, wantOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pref := func(avail, must []string) []string { return tc.preferred }
			got, ok := choose(tc.reusable, tc.aligned, tc.unaligned, tc.available, tc.size, pref)
			if ok != tc.wantOK || !slices.Equal(got, tc.want) {
				t.Fatalf("choose = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestByAffinity(t *testing.T) {
	on := func(nodes ...int64) *pluginapi.Device {
		d := &pluginapi.Device{}
		if len(nodes) > 0 {
			d.Topology = &pluginapi.TopologyInfo{}
			for _, n := range nodes {
				d.Topology.Nodes = append(d.Topology.Nodes, &pluginapi.NUMANode{ID: n})
			}
		}
		return d
	}
	devs := map[string]*pluginapi.Device{"a": on(0), "b": on(1), "c": on(0, 1), "d": on()}
	one, _ := bitmask.New(1)
	al, un, no := byAffinity(devs, []string{"a", "b", "c", "d"}, one)
	if !slices.Equal(al, []string{"b", "c"}) || !slices.Equal(un, []string{"a"}) || !slices.Equal(no, []string{"d"}) {
		t.Errorf("byAffinity = %v %v %v", al, un, no)
	}
}

// TestTopologyHints: upstream's device hints on two NUMA nodes: two
// devices on each node; one is in use on node 0.
func TestTopologyHints(t *testing.T) {
	m, err := New(Config{Dir: t.TempDir(), ActivePods: func() []*v1.Pod { return nil }, NUMANodes: []int{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	dev := func(n int64) *pluginapi.Device {
		return &pluginapi.Device{Health: pluginapi.Healthy, Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: n}}}}
	}
	m.resources["example.com/gpu"] = &resourceState{plugin: &plugin{}, devices: map[string]*pluginapi.Device{"g0": dev(0), "g1": dev(0), "g2": dev(1), "g3": dev(1)}}
	m.resources["example.com/flat"] = &resourceState{plugin: &plugin{}, devices: map[string]*pluginapi.Device{"f0": {Health: pluginapi.Healthy}}}
	m.alloc.set("other", "c", "example.com/gpu", &entry{IDs: []string{"g0"}})
	ask := func(name string, n int64) *v1.Pod {
		r := v1.ResourceList{v1.ResourceName(name): *resource.NewQuantity(n, resource.DecimalSI)}
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Limits: r, Requests: r}}}}}
	}
	str := func(hs []topologymanager.TopologyHint) string {
		out := ""
		for _, h := range hs {
			out += h.String()
		}
		return out
	}
	for _, tc := range []struct {
		name string
		n    int64
		want string
	}{
		{"example.com/gpu", 1, "{01 true}{10 true}{11 false}"},
		{"example.com/gpu", 2, "{10 true}{11 false}"},
		{"example.com/gpu", 3, "{11 true}"},
		{"example.com/gpu", 4, ""},
	} {
		p := ask(tc.name, tc.n)
		hs, ok := m.TopologyHints(context.Background(), p, &p.Spec.Containers[0])[tc.name]
		if !ok || str(hs) != tc.want {
			t.Errorf("%s x%d: hints %q (%v), want %q", tc.name, tc.n, str(hs), ok, tc.want)
		}
	}
	p := ask("example.com/flat", 1)
	if hs, ok := m.TopologyHints(context.Background(), p, &p.Spec.Containers[0])["example.com/flat"]; !ok || hs != nil {
		t.Errorf("devices without a NUMA node: hints %v, want none (no preference)", hs)
	}
}
