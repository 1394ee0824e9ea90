package topologymanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/admission"
)

// fakeProvider gives fixed hints and records its allocations.
type fakeProvider struct {
	hints, podHints map[string][]TopologyHint
	podHintCalls    int
	allocated       []string
	err             error
}

func (f *fakeProvider) TopologyHints(context.Context, *v1.Pod, *v1.Container) map[string][]TopologyHint {
	return f.hints
}
func (f *fakeProvider) PodTopologyHints(context.Context, *v1.Pod) map[string][]TopologyHint {
	f.podHintCalls++
	return f.podHints
}
func (f *fakeProvider) Allocate(_ context.Context, _ *v1.Pod, c *v1.Container, h TopologyHint) error {
	if f.err != nil {
		return f.err
	}
	f.allocated = append(f.allocated, fmt.Sprintf("%s@%v", c.Name, h.NUMANodeAffinity.Bits()))
	return nil
}

type typedErr struct{}

func (typedErr) Error() string { return "SMT Alignment Error: x" }
func (typedErr) Type() string  { return "SMTAlignmentError" }

func twoNodes() *NUMAInfo {
	return &NUMAInfo{Nodes: []int{0, 1}, NUMADistances: NUMADistances{0: {10, 11}, 1: {11, 10}}}
}

func testPod() *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "init"}}, Containers: []v1.Container{{Name: "app"}}}}
}

func TestNew(t *testing.T) {
	nine := &NUMAInfo{Nodes: []int{0, 1, 2, 3, 4, 5, 6, 7, 8}}
	for _, tc := range []struct {
		cfg     Config
		wantErr string
	}{
		{Config{}, ""},
		{Config{Policy: PolicyRestricted, NUMA: twoNodes()}, ""},
		{Config{Policy: "strict", NUMA: twoNodes()}, `unknown policy: "strict"`},
		{Config{Policy: PolicyRestricted, Scope: "node", NUMA: twoNodes()}, `unknown scope: "node"`},
		{Config{Policy: PolicyBestEffort, NUMA: nine}, "unsupported on machines with more than 8 NUMA Nodes"},
		{Config{Policy: PolicyBestEffort, NUMA: nine, Options: map[string]string{MaxAllowableNUMANodes: "9"}}, ""},
		{Config{Policy: PolicyBestEffort, NUMA: &NUMAInfo{Nodes: []int{0}}, Options: map[string]string{PreferClosestNUMANodes: "true"}}, "error getting NUMA distances"},
	} {
		_, err := New(tc.cfg)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("New(%+v) = %v, want %q", tc.cfg, err, tc.wantErr)
		}
	}
}

func TestScopes(t *testing.T) {
	n0, n1, both := TopologyHint{NUMANodeAffinity: 1, Preferred: true}, TopologyHint{NUMANodeAffinity: 2, Preferred: true}, TopologyHint{NUMANodeAffinity: 3}
	ctx := context.Background()

	// none: no hints asked, every container allocated without affinity.
	a := &fakeProvider{hints: map[string][]TopologyHint{"cpu": {n1}}}
	m, _ := New(Config{Providers: []Provider{a}})
	if r := m.Admit(ctx, admission.Attributes{Pod: testPod()}); !r.Admit || strings.Join(a.allocated, " ") != "init@[] app@[]" {
		t.Errorf("none: %+v %v", r, a.allocated)
	}

	// container scope: the two providers agree on node 1.
	a = &fakeProvider{hints: map[string][]TopologyHint{"cpu": {n0, n1, both}}}
	b := &fakeProvider{hints: map[string][]TopologyHint{"memory": {n1, both}}}
	m, _ = New(Config{Policy: PolicyRestricted, NUMA: twoNodes(), Providers: []Provider{a, b}})
	p := testPod()
	if r := m.Admit(ctx, admission.Attributes{Pod: p}); !r.Admit || strings.Join(b.allocated, " ") != "init@[1] app@[1]" {
		t.Errorf("container scope: %+v %v", r, b.allocated)
	}
	if h := m.Affinity(string(p.UID), "app"); h != n1 {
		t.Errorf("stored affinity %v", h)
	}

	// restricted: no preferred merge -> TopologyAffinityError.
	a = &fakeProvider{hints: map[string][]TopologyHint{"cpu": {n0}}}
	b = &fakeProvider{hints: map[string][]TopologyHint{"memory": {n1}}}
	m, _ = New(Config{Policy: PolicyRestricted, NUMA: twoNodes(), Providers: []Provider{a, b}})
	if r := m.Admit(ctx, admission.Attributes{Pod: testPod()}); r.Admit || r.Reason != "TopologyAffinityError" || r.Message != "Resources cannot be allocated with Topology locality" || len(a.allocated) != 0 {
		t.Errorf("restricted, no alignment: %+v %v", r, a.allocated)
	}
	// best-effort admits it anyway, on both nodes.
	m, _ = New(Config{Policy: PolicyBestEffort, NUMA: twoNodes(), Providers: []Provider{a, b}})
	if r := m.Admit(ctx, admission.Attributes{Pod: testPod()}); !r.Admit || strings.Join(b.allocated, " ") != "init@[0 1] app@[0 1]" {
		t.Errorf("best-effort: %+v %v", r, b.allocated)
	}

	// pod scope: one merge for the pod, every container with its hint.
	a = &fakeProvider{podHints: map[string][]TopologyHint{"cpu": {n1}}}
	m, _ = New(Config{Policy: PolicySingleNumaNode, Scope: ScopePod, NUMA: twoNodes(), Providers: []Provider{a}})
	if r := m.Admit(ctx, admission.Attributes{Pod: testPod()}); !r.Admit || a.podHintCalls != 1 || strings.Join(a.allocated, " ") != "init@[1] app@[1]" {
		t.Errorf("pod scope: %+v %d %v", r, a.podHintCalls, a.allocated)
	}

	// A provider's error: its own reason when typed, else unexpected.
	for err, want := range map[error]admission.Result{
		typedErr{}:            {Reason: "SMTAlignmentError", Message: "SMT Alignment Error: x"},
		errors.New("no cpus"): {Reason: "UnexpectedAdmissionError", Message: "Allocate failed due to no cpus, which is unexpected"},
	} {
		m, _ = New(Config{Providers: []Provider{&fakeProvider{err: err}}})
		if r := m.Admit(ctx, admission.Attributes{Pod: testPod()}); r != want {
			t.Errorf("provider error %v: %+v, want %+v", err, r, want)
		}
	}
	// A resize is admitted, and counted as an admission request as
	// upstream's.
	m, _ = New(Config{Providers: []Provider{&fakeProvider{err: errors.New("x")}}})
	if r := m.Admit(ctx, admission.Attributes{Pod: testPod(), Operation: admission.OperationResize}); !r.Admit {
		t.Errorf("resize: %+v", r)
	}
	if got := testutil.ToFloat64(m.metrics.requests); got != 1 {
		t.Errorf("admission requests after a resize: %v, want 1", got)
	}
}

func TestReadNUMAInfo(t *testing.T) {
	root := t.TempDir()
	for i, d := range []string{"10 21", "21 10"} {
		dir := filepath.Join(root, "sys/devices/system/node", fmt.Sprintf("node%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "distance"), []byte(d+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	info, err := ReadNUMAInfo(root)
	if err != nil || fmt.Sprint(info.Nodes) != "[0 1]" || fmt.Sprint(info.NUMADistances[1]) != "[21 10]" {
		t.Errorf("ReadNUMAInfo = %+v, %v", info, err)
	}
	if info, err := ReadNUMAInfo(t.TempDir()); err != nil || fmt.Sprint(info.Nodes) != "[0]" {
		t.Errorf("no NUMA in sysfs: %+v, %v", info, err)
	}
}
