package eviction

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/resource"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
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

// MemoryLevels are the usage levels of the memory.available thresholds,
// lowest first.
func MemoryLevels(thresholds []Threshold, s *statsv1alpha1.MemoryStats) []int64 {
	var out []int64
	for _, t := range thresholds {
		if t.Signal != MemoryAvailable {
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

	mu     sync.Mutex
	efd    int // -1: not armed
	usage  *os.File
	closed bool
}

// NewMemcgNotifier returns a notifier on the cgroup v1 memory hierarchy
// mounted at dir (its root cgroup: the node's usage). It fails when the
// kernel refuses thresholds there.
func NewMemcgNotifier(dir string) (MemoryNotifier, error) {
	n := &memcgNotifier{dir: dir, fired: make(chan struct{}, 1), efd: -1}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.event_control")); err != nil {
		return nil, fmt.Errorf("memory threshold notifications: %w", err)
	}
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

func (n *memcgNotifier) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	n.disarmLocked()
}

// watch polls the armed eventfd (a short poll timeout, so re-arming and
// closing need no wake-up) and signals Fired when the kernel wrote to it.
func (n *memcgNotifier) watch() {
	buf := make([]byte, 8)
	for {
		n.mu.Lock()
		efd, closed := n.efd, n.closed
		n.mu.Unlock()
		if closed {
			return
		}
		if efd < 0 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		fds := []unix.PollFd{{Fd: int32(efd), Events: unix.POLLIN}}
		k, err := unix.Poll(fds, 100)
		if err != nil || k == 0 {
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
