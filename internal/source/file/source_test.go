package file

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/ctortest"
)

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  containers:
  - name: c
    image: busybox:1.36
`

func TestNew(t *testing.T) {
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no directory", Config: Config{NodeName: "n1"}, WantErr: "Config.Dir is required"},
		{Name: "no node name", Config: Config{Dir: t.TempDir()}, WantErr: "Config.NodeName is required"},
		{Name: "a nil clock is the real one", Config: Config{Dir: t.TempDir(), NodeName: "n1"}},
	}, func(t *testing.T, s *Source) {
		ctortest.RealClock(t, s.cfg.Clock)
	})
}

func names(pods []*v1.Pod) string {
	var n []string
	for _, p := range pods {
		n = append(n, p.Name+"/"+p.Spec.Containers[0].Image)
	}
	return strings.Join(n, ",")
}

func recv(t *testing.T, s *Source) []*v1.Pod {
	t.Helper()
	select {
	case pods := <-s.Updates():
		return pods
	case <-time.After(5 * time.Second):
		t.Fatal("no update from the source")
		return nil
	}
}

// tickerClock is a fake clock that tells when Run made its ticker: only a
// Step after that reaches it.
type tickerClock struct {
	*testingclock.FakeClock
	made chan struct{} // closed by NewTicker
}

func (c *tickerClock) NewTicker(d time.Duration) clock.Ticker {
	defer close(c.made)
	return c.FakeClock.NewTicker(d)
}

// The source is driven by its period alone here: each change to the
// directory is followed by a Step past the period, and the set read after
// it is received. fsnotify may also wake the source (its settle timer is
// on the fake clock too, so it fires at a Step as well); either way every
// read after the change sees it, and a read that finds nothing new sends
// nothing. No test here waits for something not to be sent.
func TestSourceFollowsTheDirectory(t *testing.T) {
	dir := t.TempDir()
	// write replaces a file at once (a hidden temporary file renamed), so
	// that no read of the directory sees it half written.
	write := func(name, content string) {
		t.Helper()
		tmp := filepath.Join(dir, ".tmp-"+name)
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(name, version string) string {
		return strings.ReplaceAll(strings.ReplaceAll(podYAML, "%s", name), "1.36", version)
	}
	write("a.yaml", pod("a", "1.36"))
	write(".hidden.yaml", pod("hidden", "1.36"))
	clk := &tickerClock{FakeClock: testingclock.NewFakeClock(time.Now()), made: make(chan struct{})}
	s, err := New(Config{Dir: dir, NodeName: "n1", Period: 20 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)

	if got := names(recv(t, s)); got != "a-n1/busybox:1.36" {
		t.Fatalf("initial set %q", got)
	}
	select {
	case <-clk.made:
	case <-time.After(5 * time.Second):
		t.Fatal("Run made no ticker")
	}
	next := func(want string) {
		t.Helper()
		clk.Step(21 * time.Second)
		// The set is in the order of the pods' UIDs, which hash the path.
		got := strings.Split(names(recv(t, s)), ",")
		slices.Sort(got)
		if got := strings.Join(got, ","); got != want {
			t.Fatalf("set %q, want %q", got, want)
		}
	}

	// A new file is read at the next period.
	write("b.yaml", pod("b", "1.36"))
	next("a-n1/busybox:1.36,b-n1/busybox:1.36")

	// A broken edit keeps the last good pod of that file: the next set
	// sent (once another file arrives) still has it. Had the broken edit
	// changed the set, that set would lack b, or (unread) be replaced by
	// one that lacks it.
	write("b.yaml", "kind: Pod\nmetadata: {name: [\n")
	clk.Step(21 * time.Second)
	write("c.yaml", pod("c", "1.36"))
	next("a-n1/busybox:1.36,b-n1/busybox:1.36,c-n1/busybox:1.36")

	// A fixed edit replaces it; removal drops it.
	write("b.yaml", pod("b", "1.37"))
	next("a-n1/busybox:1.36,b-n1/busybox:1.37,c-n1/busybox:1.36")
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	next("a-n1/busybox:1.36,c-n1/busybox:1.36")
}

// scan, called here without Run, sends a set only when it changed: not
// for a directory read again unchanged, nor for a broken edit, which keeps
// the file's last good pods. Nothing else reads the directory, so "nothing
// was sent" is checked at once, with no wait.
func TestScanSendsOnlyChanges(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	writes := 0
	write := func(content string) {
		t.Helper()
		// A new modification time for each write, whatever the file
		// system's granularity: the source rereads a file whose time or
		// size changed.
		writes++
		mod := time.Now().Add(time.Duration(writes) * time.Minute)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(Config{Dir: dir, NodeName: "n1", Clock: testingclock.NewFakeClock(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	logger := klog.Background()
	sent := func() string {
		t.Helper()
		select {
		case pods := <-s.Updates():
			return names(pods)
		default:
			return "nothing"
		}
	}
	write(strings.ReplaceAll(podYAML, "%s", "a"))
	s.scan(klog.NewContext(context.Background(), logger))
	if got := sent(); got != "a-n1/busybox:1.36" {
		t.Fatalf("first scan sent %s", got)
	}
	s.scan(klog.NewContext(context.Background(), logger))
	if got := sent(); got != "nothing" {
		t.Fatalf("a scan of the unchanged directory sent %s", got)
	}
	write("kind: Pod\nmetadata: {name: [\n")
	s.scan(klog.NewContext(context.Background(), logger))
	if got := sent(); got != "nothing" {
		t.Fatalf("a scan after a broken edit sent %s", got)
	}
	write(strings.ReplaceAll(strings.ReplaceAll(podYAML, "%s", "a"), "1.36", "1.37"))
	s.scan(klog.NewContext(context.Background(), logger))
	if got := sent(); got != "a-n1/busybox:1.37" {
		t.Fatalf("a scan after the fix sent %s", got)
	}
}

// A manifest removed (as fsnotify reported it) and written back before the
// directory is read: the set without its pod is sent and delivered before
// the set with it again, so the pod is removed and re-added as upstream's
// (which then restarts it); a removal that does not change the set sends
// nothing more.
func TestScanDeliversARemovalBeforeTheFileIsBack(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	content := strings.ReplaceAll(podYAML, "%s", "a")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Dir: dir, NodeName: "n1", Clock: testingclock.NewFakeClock(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := klog.Background()
	s.scan(klog.NewContext(ctx, logger))
	first := <-s.Updates()
	if names(first) != "a-n1/busybox:1.36" {
		t.Fatalf("first set %q", names(first))
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	s.removed[path] = true
	done := make(chan struct{})
	go func() { s.scan(klog.NewContext(ctx, logger)); close(done) }()
	if got := names(<-s.Updates()); got != "" {
		t.Fatalf("set after the removal %q, want an empty one", got)
	}
	again := <-s.Updates()
	<-done
	if names(again) != "a-n1/busybox:1.36" || again[0].UID != first[0].UID {
		t.Fatalf("set after the file is back %q (UID %s, was %s)", names(again), again[0].UID, first[0].UID)
	}

	// A removal of a file that held no pod changes nothing.
	s.removed[filepath.Join(dir, "never.yaml")] = true
	s.scan(klog.NewContext(ctx, logger))
	select {
	case pods := <-s.Updates():
		t.Fatalf("a removal that changed nothing sent %q", names(pods))
	default:
	}
}
