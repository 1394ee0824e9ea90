package allocation

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/admission"
)

// node admits pods while their CPU requests fit in capacity milli-CPU, as
// the predicates would; it records the admissions.
type node struct {
	capacity int64
	calls    []string
}

func (n *node) admit(_ context.Context, a admission.Attributes) admission.Result {
	used := a.Pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
	for _, p := range a.OtherPods {
		used += p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
	}
	n.calls = append(n.calls, string(a.Operation)+":"+a.Pod.Name)
	if used > n.capacity {
		return admission.Result{Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu"}
	}
	return admission.Result{Admit: true}
}

func pod(name, cpu string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), Generation: 1},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}}},
	}
}

func resized(p *v1.Pod, cpu string) *v1.Pod {
	q := p.DeepCopy()
	q.Generation++
	q.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse(cpu)
	return q
}

type fixture struct {
	m     *Manager
	node  *node
	pods  map[types.UID]*v1.Pod
	rec   *record.FakeRecorder
	clock *testingclock.FakeClock
	dir   string
}

func newFixture(t *testing.T, dir string, capacity int64) *fixture {
	t.Helper()
	f := &fixture{node: &node{capacity: capacity}, pods: map[types.UID]*v1.Pod{}, rec: record.NewFakeRecorder(100),
		clock: testingclock.NewFakeClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)), dir: dir}
	m, err := New(Config{Dir: dir, Admit: f.node.admit, Recorder: f.rec, Clock: f.clock,
		Pod: func(uid types.UID) (*v1.Pod, bool) { p, ok := f.pods[uid]; return p, ok },
		Active: func() []*v1.Pod {
			var out []*v1.Pod
			for _, p := range f.pods {
				out = append(out, p)
			}
			return out
		}})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return f
}

func (f *fixture) add(t *testing.T, p *v1.Pod) bool {
	t.Helper()
	var others []*v1.Pod
	for _, o := range f.pods {
		others = append(others, o)
	}
	r, pending := f.m.AddPod(context.Background(), p, others)
	if !r.Admit {
		t.Fatalf("%s refused: %s", p.Name, r.Message)
	}
	f.pods[p.UID] = p
	return pending
}

// update gives the pod manager p's new version and tells the manager.
func (f *fixture) update(p *v1.Pod) []*v1.Pod {
	old := f.pods[p.UID]
	f.pods[p.UID] = p
	return f.m.PodUpdated(context.Background(), old, p)
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (f *fixture) allocatedCPU(uid types.UID) string {
	p, _ := f.m.UpdatePodFromAllocation(f.pods[uid])
	return p.Spec.Containers[0].Resources.Requests.Cpu().String()
}

func conds(m *Manager, uid types.UID) string {
	var out []string
	for _, c := range m.Conditions(uid) {
		out = append(out, string(c.Type)+"/"+c.Reason)
	}
	return strings.Join(out, ",")
}

// TestResizeAccepted: a resize that fits is allocated at once, the pod
// resynced, in progress until a sync reports it actuated, with upstream's
// events; the allocation survives a restart.
func TestResizeAccepted(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir, 1000)
	f.add(t, pod("a", "200m"))
	synced := f.update(resized(f.pods["a"], "500m"))
	if len(synced) != 1 || synced[0].Name != "a" {
		t.Fatalf("synced %v", synced)
	}
	if got := f.allocatedCPU("a"); got != "500m" {
		t.Errorf("allocated %s", got)
	}
	if got := conds(f.m, "a"); got != "PodResizeInProgress/" {
		t.Errorf("conditions %q", got)
	}
	ev := f.events()
	if len(ev) != 1 || !strings.HasPrefix(ev[0], `Normal ResizeStarted Pod resize started: {"containers":[{"name":"c","resources":{"requests":{"cpu":"500m"}}}],"generation":2}`) {
		t.Errorf("events %q", ev)
	}
	allocated, _ := f.m.UpdatePodFromAllocation(f.pods["a"])
	f.m.ObserveSync(context.Background(), allocated, true, "")
	if got := conds(f.m, "a"); got != "PodResizeInProgress/" {
		t.Errorf("still in progress: %q", got)
	}
	f.m.ObserveSync(context.Background(), allocated, false, "")
	if got := conds(f.m, "a"); got != "" {
		t.Errorf("after completion: %q", got)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal ResizeCompleted Pod resize completed: ") {
		t.Errorf("events %q", ev)
	}

	// A restart: the allocation is read back; the pod is admitted with it.
	g := newFixture(t, dir, 1000)
	if pending := g.add(t, f.pods["a"]); pending {
		t.Error("pending after restart")
	}
	if got := g.allocatedCPU("a"); got != "500m" {
		t.Errorf("allocated after restart %s", got)
	}
}

// TestResizeDeferredThenRetried: a resize that does not fit is Deferred
// (the allocation unchanged), retried when a pod goes away; Infeasible is
// not retried; a resize reverted clears the condition.
func TestResizeDeferredThenRetried(t *testing.T) {
	f := newFixture(t, "", 1000)
	f.add(t, pod("a", "200m"))
	f.add(t, pod("b", "500m"))
	synced := f.update(resized(f.pods["a"], "600m"))
	if len(synced) != 1 {
		t.Errorf("synced %v (the condition changed)", synced)
	}
	if got := f.allocatedCPU("a"); got != "200m" {
		t.Errorf("allocated %s", got)
	}
	if got := conds(f.m, "a"); got != "PodResizePending/Deferred" {
		t.Errorf("conditions %q", got)
	}
	if c := f.m.Conditions("a")[0]; c.Message != "Node didn't have enough resource: cpu" || c.ObservedGeneration != 2 {
		t.Errorf("condition %+v", c)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning ResizeDeferred Pod resize Deferred: ") {
		t.Errorf("events %q", ev)
	}
	if !f.m.HasPending() {
		t.Error("not pending")
	}
	// Nothing changed: retrying keeps it deferred, no new event.
	if synced := f.m.Retry(context.Background(), TriggerPodsAdded); len(synced) != 0 {
		t.Errorf("synced %v", synced)
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events %q", ev)
	}
	// b goes: the resize fits.
	delete(f.pods, "b")
	f.m.RemovePod(context.Background(), "b")
	synced = f.m.Retry(context.Background(), TriggerPodsRemoved)
	if len(synced) != 1 || f.allocatedCPU("a") != "600m" || conds(f.m, "a") != "PodResizeInProgress/" || f.m.HasPending() {
		t.Errorf("after retry: synced %v, allocated %s, conditions %q", synced, f.allocatedCPU("a"), conds(f.m, "a"))
	}
	f.events()

	// Reverted before it was allocated.
	f.add(t, pod("c", "300m"))
	f.update(resized(f.pods["c"], "900m"))
	if got := conds(f.m, "c"); got != "PodResizePending/Deferred" {
		t.Fatalf("c: %q", got)
	}
	back := resized(f.pods["c"], "300m")
	f.update(back)
	if got := conds(f.m, "c"); got != "" {
		t.Errorf("reverted: %q", got)
	}

	// Pod-level resources: not resized by nodelet, Infeasible, not retried.
	d := pod("d", "100m")
	d.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}
	f.add(t, d)
	d2 := d.DeepCopy()
	d2.Generation++
	d2.Spec.Resources.Limits[v1.ResourceCPU] = resource.MustParse("2")
	f.update(d2)
	if got := conds(f.m, "d"); got != "PodResizePending/Infeasible" {
		t.Errorf("pod-level: %q", got)
	}
	if f.m.HasPending() {
		t.Error("an infeasible resize is pending")
	}
}

// TestRetryOrderAndPeriod: pending resizes are retried first those not
// increasing requests, then by priority; the periodic retry is first due
// 30 s after start, then every 3 min.
func TestRetryOrderAndPeriod(t *testing.T) {
	f := newFixture(t, "", 1000)
	f.add(t, pod("up", "100m"))
	f.add(t, pod("down", "800m"))
	// Both deferred: up wants more than fits, down's request does not
	// increase but its limit change goes through admission all the same.
	f.node.capacity = 0
	f.update(resized(f.pods["up"], "300m"))
	f.update(resized(f.pods["down"], "700m"))
	f.node.calls = nil
	f.m.Retry(context.Background(), TriggerPodsRemoved)
	if got := strings.Join(f.node.calls, " "); got != "resize:down resize:up" {
		t.Errorf("order %q", got)
	}
	if got := f.m.RetryDue(context.Background()); got != nil {
		t.Errorf("due at once: %v", got)
	}
	f.node.capacity = 2000
	f.clock.Step(3*time.Minute + time.Second)
	if got := f.m.RetryDue(context.Background()); len(got) != 2 {
		t.Errorf("periodic retry synced %v", got)
	}
}

// TestObserveSyncError: a failed actuation sets the in-progress
// condition's reason Error with the message, one event per change.
func TestObserveSyncError(t *testing.T) {
	f := newFixture(t, "", 1000)
	f.add(t, pod("a", "200m"))
	f.update(resized(f.pods["a"], "500m"))
	f.events()
	allocated, _ := f.m.UpdatePodFromAllocation(f.pods["a"])
	for range 2 {
		f.m.ObserveSync(context.Background(), allocated, true, "cannot decrease memory limits: x")
	}
	c := f.m.Conditions("a")
	if len(c) != 1 || c[0].Reason != v1.PodReasonError || c[0].Message != "cannot decrease memory limits: x" {
		t.Errorf("conditions %+v", c)
	}
	if ev := f.events(); len(ev) != 1 || !strings.Contains(ev[0], `Warning ResizeError Pod resize error: {"containers":`) || !strings.Contains(ev[0], `"error":"cannot decrease memory limits: x"`) {
		t.Errorf("events %q", ev)
	}
}

// guaranteed is a Guaranteed pod of one container.
func guaranteed(name, cpu, mem string) *v1.Pod {
	p := pod(name, cpu)
	r := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: r, Limits: r.DeepCopy()}
	return p
}

// TestGuaranteedCPUResizeWithStaticCPUManager: under the static CPU
// manager policy a Guaranteed pod's CPU resize is Infeasible with
// upstream's message; its memory and a Burstable pod's CPU still resize.
func TestGuaranteedCPUResizeWithStaticCPUManager(t *testing.T) {
	f := newFixture(t, "", 4000)
	f.m.cfg.CPUManagerStatic = true
	f.add(t, guaranteed("g", "1", "64Mi"))
	f.update(guaranteed("g", "2", "64Mi"))
	if got := conds(f.m, "g"); got != "PodResizePending/Infeasible" {
		t.Errorf("guaranteed CPU resize: %q", got)
	}
	if ev := f.events(); len(ev) != 1 || !strings.Contains(ev[0], `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy \"static\"`) &&
		!strings.Contains(ev[0], `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`) {
		t.Errorf("events %q", ev)
	}
	f.update(guaranteed("g", "1", "128Mi"))
	if got := conds(f.m, "g"); got != "PodResizeInProgress/" {
		t.Errorf("guaranteed memory resize: %q", got)
	}
	f.add(t, pod("b", "100m"))
	f.update(resized(f.pods["b"], "200m"))
	if got := conds(f.m, "b"); got != "PodResizeInProgress/" {
		t.Errorf("burstable CPU resize: %q", got)
	}
}

// TestGuaranteedMemoryResizeWithStaticMemoryManager: under the Static
// memory manager policy a Guaranteed pod's memory resize is Infeasible
// with upstream's message; its CPU still resizes.
func TestGuaranteedMemoryResizeWithStaticMemoryManager(t *testing.T) {
	f := newFixture(t, "", 4000)
	f.m.cfg.MemoryManagerStatic = true
	f.add(t, guaranteed("g", "1", "64Mi"))
	f.update(guaranteed("g", "1", "128Mi"))
	if got := conds(f.m, "g"); got != "PodResizePending/Infeasible" {
		t.Errorf("guaranteed memory resize: %q", got)
	}
	if ev := f.events(); len(ev) != 1 || !strings.Contains(ev[0], `alongside Memory Manager policy`) || !strings.Contains(ev[0], `Static`) {
		t.Errorf("events %q", ev)
	}
	f.update(guaranteed("g", "2", "64Mi"))
	if got := conds(f.m, "g"); got != "PodResizeInProgress/" {
		t.Errorf("guaranteed CPU resize: %q", got)
	}
}
