package eviction

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/resource"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
)

// MemoryNotifier tells the manager at once when the node's memory usage
// crosses a level, so memory pressure is acted on before the next period
// (upstream waits for its 10 s loop unless kernelMemcgNotification is set,
// and a fast-growing pod often meets the kernel's OOM killer first).
type MemoryNotifier interface {
	// Arm sets the level (bytes of memory.usage_in_bytes, page cache
	// included), replacing the previous one.
	Arm(usage int64) error
	// Fired is signalled (coalesced) each time usage crosses the level.
	Fired() <-chan struct{}
	// Close disarms it.
	Close()
}

// UsageLevel is the memory usage (page cache included) at which
// memory.available reaches the threshold t, from the node's memory figures
// s, as upstream arms its notifier: capacity - threshold + inactive file.
func UsageLevel(t Threshold, s *statsv1alpha1.MemoryStats) (int64, bool) {
	if s == nil || s.AvailableBytes == nil || s.WorkingSetBytes == nil || s.UsageBytes == nil {
		return 0, false
	}
	capacity := int64(*s.AvailableBytes + *s.WorkingSetBytes)
	inactive := int64(*s.UsageBytes) - int64(*s.WorkingSetBytes)
	q := t.Value.Of(resource.NewQuantity(capacity, resource.BinarySI))
	return capacity - q.Value() + max(inactive, 0), true
}

// MemoryLevels are the usage levels of the thresholds of a memory signal
// (MemoryAvailable or AllocatableMemoryAvailable) from the figures s of
// its cgroup, lowest first.
func MemoryLevels(thresholds []Threshold, signal Signal, s *statsv1alpha1.MemoryStats) []int64 {
	var out []int64
	for _, t := range thresholds {
		if t.Signal != signal {
			continue
		}
		if l, ok := UsageLevel(t, s); ok {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// memcgNotifier is a cgroup v1 memory threshold: an eventfd registered in
// cgroup.event_control for memory.usage_in_bytes, which the kernel signals
// when usage crosses the level either way.
type memcgNotifier struct {
	dir   string
	fired chan struct{}
	// wake (an eventfd) interrupts the watcher's poll: re-armed, closed.
	wake int

	mu     sync.Mutex
	efd    int // -1: not armed
	usage  *os.File
	closed bool
}

// NewMemcgNotifier returns a notifier on the memory cgroup dir of the
// cgroup v1 memory hierarchy (its root: the node's usage; kubepods: the
// pods'). It fails when the kernel refuses thresholds there.
func NewMemcgNotifier(dir string) (MemoryNotifier, error) {
	if _, err := os.Stat(filepath.Join(dir, "cgroup.event_control")); err != nil {
		return nil, fmt.Errorf("memory threshold notifications: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	n := &memcgNotifier{dir: dir, fired: make(chan struct{}, 1), wake: wake, efd: -1}
	go n.watch()
	return n, nil
}

func (n *memcgNotifier) Fired() <-chan struct{} { return n.fired }

func (n *memcgNotifier) Arm(usage int64) error {
	if usage <= 0 {
		return fmt.Errorf("memory threshold level %d", usage)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	f, err := os.Open(filepath.Join(n.dir, "memory.usage_in_bytes"))
	if err != nil {
		unix.Close(efd)
		return err
	}
	ctl := filepath.Join(n.dir, "cgroup.event_control")
	if err := os.WriteFile(ctl, []byte(fmt.Sprintf("%d %d %d", efd, f.Fd(), usage)), 0o200); err != nil {
		unix.Close(efd)
		f.Close()
		return fmt.Errorf("arm a memory threshold in %s: %w", ctl, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		unix.Close(efd)
		f.Close()
		return errors.New("notifier closed")
	}
	n.disarmLocked()
	n.efd, n.usage = efd, f
	n.wakeWatcher()
	return nil
}

// disarmLocked closes the eventfd: the kernel drops the threshold with it.
func (n *memcgNotifier) disarmLocked() {
	if n.efd >= 0 {
		unix.Close(n.efd)
		n.usage.Close()
		n.efd, n.usage = -1, nil
	}
}

func (n *memcgNotifier) wakeWatcher() {
	_, _ = unix.Write(n.wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
}

func (n *memcgNotifier) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.closed = true
	n.disarmLocked()
	n.wakeWatcher()
}

// watch blocks in poll on the armed eventfd and the wake-up one, and
// signals Fired when the kernel wrote to the former.
func (n *memcgNotifier) watch() {
	buf := make([]byte, 8)
	defer unix.Close(n.wake)
	for {
		n.mu.Lock()
		efd, closed := n.efd, n.closed
		n.mu.Unlock()
		if closed {
			return
		}
		fds := []unix.PollFd{{Fd: int32(n.wake), Events: unix.POLLIN}}
		if efd >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(efd), Events: unix.POLLIN})
		}
		if _, err := unix.Poll(fds, -1); err != nil {
			continue // EINTR
		}
		if fds[0].Revents&unix.POLLIN != 0 {
			_, _ = unix.Read(n.wake, buf)
		}
		if len(fds) < 2 || fds[1].Revents&unix.POLLIN == 0 {
			continue
		}
		n.mu.Lock()
		if n.efd == efd { // not re-armed meanwhile: still ours to read
			if _, err := unix.Read(efd, buf); err == nil {
				select {
				case n.fired <- struct{}{}:
				default:
				}
			}
		}
		n.mu.Unlock()
	}
}

// pollNotifier is the notifier of cgroup v2, whose kernel interface has
// no memory thresholds: the usage is read every period (one small file)
// and compared with the level, and a change of the cgroup's memory.events
// (memory.high or memory.max reached, an OOM kill: the kernel notifies
// those as file modifications) wakes it at once.
type pollNotifier struct {
	usage  func() (int64, error)
	fired  chan struct{}
	stop   chan struct{}
	once   sync.Once
	events *fsnotify.Watcher

	mu    sync.Mutex
	level int64 // 0: not armed
	above bool  // the usage was at or above the level when last read
}

// DefaultPollPeriod is how often a pollNotifier reads the usage.
const DefaultPollPeriod = 100 * time.Millisecond

// PollConfig configures a poll notifier.
type PollConfig struct {
	// Usage reads the memory usage (the node's or the pods', page cache
	// included). Required.
	Usage func() (int64, error)
	// Period is how often Usage is read (DefaultPollPeriod when zero).
	Period time.Duration
	// Events, when not empty, is the cgroup's memory.events file to watch:
	// a change wakes the notifier at once.
	Events string
	// Clock times the reads (the real clock when nil).
	Clock clock.WithTicker
}

// NewPollNotifier returns a notifier reading the usage every period.
func NewPollNotifier(cfg PollConfig) (MemoryNotifier, error) {
	usage, period, events, clk := cfg.Usage, cfg.Period, cfg.Events, cfg.Clock
	if usage == nil {
		return nil, errors.New("eviction: PollConfig.Usage is required")
	}
	if period <= 0 {
		period = DefaultPollPeriod
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	n := &pollNotifier{usage: usage, fired: make(chan struct{}, 1), stop: make(chan struct{})}
	var evc chan fsnotify.Event
	var errc chan error
	if events != "" {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			return nil, err
		}
		if err := w.Add(events); err != nil {
			w.Close()
			return nil, fmt.Errorf("watch %s: %w", events, err)
		}
		n.events = w
		evc, errc = w.Events, w.Errors
	}
	tick := clk.NewTicker(period)
	go func() {
		defer tick.Stop()
		for {
			select {
			case <-n.stop:
				return
			case <-evc:
				n.signal()
			case <-errc:
			case <-tick.C():
				n.check()
			}
		}
	}()
	return n, nil
}

func (n *pollNotifier) Fired() <-chan struct{} { return n.fired }

func (n *pollNotifier) signal() {
	select {
	case n.fired <- struct{}{}:
	default:
	}
}

// check reads the usage and signals a crossing of the level either way.
func (n *pollNotifier) check() {
	u, err := n.usage()
	if err != nil {
		return
	}
	n.mu.Lock()
	crossed := n.level > 0 && (u >= n.level) != n.above
	n.above = n.level > 0 && u >= n.level
	n.mu.Unlock()
	if crossed {
		n.signal()
	}
}

func (n *pollNotifier) Arm(level int64) error {
	if level <= 0 {
		return fmt.Errorf("memory threshold level %d", level)
	}
	u, err := n.usage()
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.level, n.above = level, u >= level
	return nil
}

func (n *pollNotifier) Close() {
	n.once.Do(func() {
		close(n.stop)
		if n.events != nil {
			n.events.Close()
		}
	})
}
