package eviction

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestMemoryLevels(t *testing.T) {
	// 1000 Mi of memory, 600 Mi working set, 100 Mi inactive page cache.
	s := &statsv1alpha1.MemoryStats{AvailableBytes: ptr.To(uint64(400 * mi)), WorkingSetBytes: ptr.To(uint64(600 * mi)), UsageBytes: ptr.To(uint64(700 * mi))}
	ths := mustParse(t, Settings{
		Hard: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
		Soft: map[string]string{"memory.available": "200Mi"}, SoftGracePeriod: map[string]string{"memory.available": "1m"},
	})
	got := MemoryLevels(ths, MemoryAvailable, s)
	// Usage at which the working set leaves the threshold: capacity -
	// threshold + inactive file.
	want := []int64{(1000 - 200 + 100) * mi, (1000 - 100 + 100) * mi}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("levels %v, want %v", got, want)
	}
	if _, ok := UsageLevel(Threshold{Signal: MemoryAvailable, Value: Value{Quantity: resource.NewQuantity(1, resource.BinarySI)}}, &statsv1alpha1.MemoryStats{}); ok {
		t.Error("a level without figures")
	}
}

type fakeNotifier struct {
	armed chan int64
	fired chan struct{}
}

func (f *fakeNotifier) Arm(usage int64) error  { f.armed <- usage; return nil }
func (f *fakeNotifier) Fired() <-chan struct{} { return f.fired }
func (f *fakeNotifier) Close()                 {}

// Run arms the notifier at the next level above the usage after each
// observation, and observes again as soon as it fires, before the period
// ends.
func TestManagerMemoryNotifier(t *testing.T) {
	s := summary(400*mi, 600*mi, 50<<30, 100<<30, 1000, 1000, 1000, 10)
	s.Node.Memory.UsageBytes = ptr.To(uint64(700 * mi))
	sum := &countingSummary{fakeSummary: fakeSummary{s: s}, calls: make(chan struct{}, 10)}
	n := &fakeNotifier{armed: make(chan int64, 10), fired: make(chan struct{}, 1)}
	m, err := New(Config{
		Thresholds: mustParse(t, Settings{Hard: map[string]string{"memory.available": "100Mi"}}), Summary: sum,
		Recorder: record.NewFakeRecorder(10), MemoryNotifiers: map[Signal]MemoryNotifier{MemoryAvailable: n}, Clock: testingclock.NewFakeClock(t0),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx)
	<-sum.calls
	if l := <-n.armed; l != 1000*mi {
		t.Errorf("armed at %d, want %d", l, 1000*mi)
	}
	n.fired <- struct{}{}
	select {
	case <-sum.calls:
	case <-time.After(10 * time.Second):
		t.Fatal("no observation after the notification (the fake clock's period never passes)")
	}
	<-n.armed
}

type countingSummary struct {
	fakeSummary
	calls chan struct{}
	// mu guards the summary, which a test may replace (set) while Run
	// reads it.
	mu sync.Mutex
}

func (c *countingSummary) NodeSummary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	defer func() { c.calls <- struct{}{} }()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fakeSummary.NodeSummary(ctx)
}

// set replaces the summary NodeSummary returns.
func (c *countingSummary) set(s *statsv1alpha1.Summary) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s = s
}

// The cgroup v1 notifier against the kernel: a threshold armed 8 MiB above
// a fresh memory cgroup's usage fires once a process there takes 32 MiB.
func TestMemcgNotifier(t *testing.T) {
	root := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(root, "cgroup.event_control")); err != nil {
		t.Skipf("no cgroup v1 memory hierarchy here: %v", err)
	}
	dir := filepath.Join(root, "nodelet-memcg-test-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	n, err := NewMemcgNotifier(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Arm(8 << 20); err != nil {
		t.Fatal(err)
	}
	// tail holds the 32 MiB line (no newline) in memory until its input
	// ends.
	cmd := exec.Command("sh", "-c", "echo $$ > "+filepath.Join(dir, "cgroup.procs")+" && head -c 33554432 /dev/zero | tail >/dev/null; sleep 30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		// The cgroup goes once its processes are gone (the kernel may
		// take a moment after the kill).
		_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return os.Remove(dir) == nil, nil
		})
	})
	select {
	case <-n.Fired():
	case <-time.After(20 * time.Second):
		t.Fatal("the threshold never fired")
	}
}

// The pods' cgroup's notifier is armed from the summary's "pods" system
// container, at the level of allocatableMemory.available's threshold.
func TestManagerPodsMemoryNotifier(t *testing.T) {
	s := summary(400*mi, 600*mi, 50<<30, 100<<30, 1000, 1000, 1000, 10)
	// The pods' cgroup: limited to 1000 Mi, 300 Mi working set, 50 Mi
	// inactive page cache.
	s.Node.SystemContainers = []statsv1alpha1.ContainerStats{{Name: statsv1alpha1.SystemContainerPods, Memory: &statsv1alpha1.MemoryStats{
		AvailableBytes: ptr.To(uint64(700 * mi)), WorkingSetBytes: ptr.To(uint64(300 * mi)), UsageBytes: ptr.To(uint64(350 * mi))}}}
	sum := &countingSummary{fakeSummary: fakeSummary{s: s}, calls: make(chan struct{}, 10)}
	pods := &fakeNotifier{armed: make(chan int64, 10), fired: make(chan struct{}, 1)}
	m, err := New(Config{
		Thresholds: mustParse(t, Settings{Hard: map[string]string{"memory.available": "200Mi"}, PodsAllocatable: true}), Summary: sum,
		Recorder: record.NewFakeRecorder(10), MemoryNotifiers: map[Signal]MemoryNotifier{AllocatableMemoryAvailable: pods}, Clock: testingclock.NewFakeClock(t0),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx)
	<-sum.calls
	if l := <-pods.armed; l != (1000-200+50)*mi {
		t.Errorf("armed at %d Mi, want %d Mi", l/mi, 1000-200+50)
	}
	pods.fired <- struct{}{}
	select {
	case <-sum.calls:
	case <-time.After(10 * time.Second):
		t.Fatal("no observation after the pods' notification")
	}
}

// The cgroup v2 notifier: the usage read at each tick of the (fake)
// clock, a crossing either way signalled once.
func TestPollNotifier(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	var mu sync.Mutex
	usage := int64(100)
	read := make(chan struct{}, 100)
	nf, err := NewPollNotifier(PollConfig{Usage: func() (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		read <- struct{}{}
		return usage, nil
	}, Period: time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer nf.Close()
	// NewPollNotifier made its ticker before it returned: this Step
	// reaches it.
	clk.Step(time.Second)
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("the usage was not read at the tick")
	}
	// The crossings, through check (what each tick runs).
	n := nf.(*pollNotifier)
	fired := func() bool {
		select {
		case <-n.Fired():
			return true
		default:
			return false
		}
	}
	check := func(v int64) bool {
		mu.Lock()
		usage = v
		mu.Unlock()
		n.check()
		return fired()
	}
	if check(300) {
		t.Error("fired before it was armed")
	}
	if err := n.Arm(200); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		usage int64
		fires bool
	}{{150, true}, {150, false}, {250, true}, {260, false}, {200, false}, {199, true}, {100, false}} {
		if got := check(tc.usage); got != tc.fires {
			t.Errorf("step %d, usage %d: fired %v, want %v", i, tc.usage, got, tc.fires)
		}
	}
}

// The v2 notifier wakes at once when memory.events changes.
func TestPollNotifierEvents(t *testing.T) {
	events := filepath.Join(t.TempDir(), "memory.events")
	if err := os.WriteFile(events, []byte("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := NewPollNotifier(PollConfig{Usage: func() (int64, error) { return 1, nil }, Period: time.Hour, Events: events, Clock: testingclock.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := os.WriteFile(events, []byte("low 0\nhigh 0\nmax 1\noom 0\noom_kill 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.Fired():
	case <-time.After(10 * time.Second):
		t.Fatal("no signal when memory.events changed")
	}
}

func TestNewPollNotifier(t *testing.T) {
	if _, err := NewPollNotifier(PollConfig{}); err == nil || !strings.Contains(err.Error(), "PollConfig.Usage is required") {
		t.Errorf("no usage: %v", err)
	}
	if _, err := NewPollNotifier(PollConfig{Usage: func() (int64, error) { return 0, nil }, Events: "/nonexistent/memory.events"}); err == nil {
		t.Error("a memory.events that is not there was accepted")
	}
}
