package memtrim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Config configures a Trimmer.
type Config struct {
	// Ready are closed once start-up is over (the node registered, every
	// pod source seen once): the trim waits for all of them. Required.
	Ready []<-chan struct{}
	// Settle is how long the trim waits after the last of Ready, for
	// the first syncs of the pods already there to finish (30 s when 0).
	Settle time.Duration
	// Clock times the waits (the real clock when nil).
	Clock clock.Clock
}

// Trimmer trims once, when start-up is over.
type Trimmer struct {
	cfg Config
}

// New returns a Trimmer for cfg. It fails when cfg has no Ready.
func New(cfg Config) (*Trimmer, error) {
	if len(cfg.Ready) == 0 || slices.Contains(cfg.Ready, nil) {
		return nil, errors.New("memtrim: Config.Ready is required")
	}
	if cfg.Settle == 0 {
		cfg.Settle = 30 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Trimmer{cfg: cfg}, nil
}

// Run waits for start-up to be over, trims, and returns (at once when ctx
// is done).
func (t *Trimmer) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	for _, ready := range t.cfg.Ready {
		select {
		case <-ctx.Done():
			return nil
		case <-ready:
		}
	}
	select {
	case <-ctx.Done():
		return nil
	case <-t.cfg.Clock.After(t.cfg.Settle):
	}
	before := rssFileKiB()
	n, err := TrimSelf()
	if err != nil {
		logger.Info("Cannot give back the binary's start-up pages", "reason", err.Error())
		return nil
	}
	logger.Info("Gave back the binary's pages start-up used; those in use come back from the file", "mappings", n, "rssFileKiBBefore", before, "rssFileKiBAfter", rssFileKiB())
	return nil
}

// TrimSelf asks the kernel to reclaim the pages of this process's
// read-only private mappings of its own executable, and returns how many
// mappings it advised.
func TrimSelf() (int, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	ranges, err := readOnlyMappings(f, exe)
	f.Close()
	if err != nil {
		return 0, err
	}
	if len(ranges) == 0 {
		return 0, fmt.Errorf("no read-only mapping of %s in /proc/self/maps", exe)
	}
	for _, r := range ranges {
		// The mapping is ours and stays mapped; only its pages go.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r.start, r.end-r.start, unix.MADV_PAGEOUT); errno != 0 {
			return 0, fmt.Errorf("madvise(MADV_PAGEOUT) %#x-%#x: %w", r.start, r.end, errno)
		}
	}
	return len(ranges), nil
}

// mapping is an address range [start, end).
type mapping struct{ start, end uintptr }

// readOnlyMappings returns the ranges of maps (the format of
// /proc/PID/maps) that map path privately without write permission.
func readOnlyMappings(maps io.Reader, path string) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		// address perms offset dev inode pathname (the pathname may hold
		// spaces: it is everything after the fifth field).
		f := strings.SplitN(sc.Text(), " ", 6)
		if len(f) < 6 || strings.TrimLeft(f[5], " ") != path {
			continue
		}
		perms := f[1]
		if len(perms) != 4 || perms[1] == 'w' || perms[3] != 'p' {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("maps: bad address range %q", f[0])
		}
		start, err := strconv.ParseUint(lo, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("maps: %w", err)
		}
		end, err := strconv.ParseUint(hi, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("maps: %w", err)
		}
		out = append(out, mapping{uintptr(start), uintptr(end)})
	}
	return out, sc.Err()
}

// rssFileKiB is this process's resident file pages (RssFile), -1 when
// unknown.
func rssFileKiB() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "RssFile:" {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}
