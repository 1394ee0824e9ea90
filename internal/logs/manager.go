package logs

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

const (
	// timestampFormat is the suffix of a rotated log, as upstream.
	timestampFormat = "20060102-150405"
	// compressSuffix marks a compressed rotated log.
	compressSuffix = ".gz"
	// tmpSuffix marks a compression in progress.
	tmpSuffix = ".tmp"

	// Defaults of the KubeletConfiguration fields, used for zero values.
	DefaultMaxSize         = 10 * 1024 * 1024
	DefaultMaxFiles        = 5
	DefaultMonitorInterval = 10 * time.Second
	DefaultMaxWorkers      = 1
)

// Config configures a Manager: the runtime and clock, and the
// KubeletConfiguration fields, where a zero field takes the upstream default.
type Config struct {
	// Runtime is the CRI runtime service the running containers and their
	// log paths come from, and that reopens rotated logs.
	Runtime internalapi.RuntimeService
	// Clock drives the monitor interval and names rotated files (the real
	// clock when nil).
	Clock clock.WithTicker
	// MaxSize is containerLogMaxSize in bytes (default 10Mi): a log at least
	// this big is rotated. A negative value disables rotation, as upstream.
	MaxSize int64
	// MaxFiles is containerLogMaxFiles (default 5, must be >= 2): the most
	// files a container's log may span, the current one included.
	MaxFiles int
	// MonitorInterval is containerLogMonitorInterval (default 10s).
	MonitorInterval time.Duration
	// MaxWorkers is containerLogMaxWorkers (default 1): how many containers
	// are processed at once.
	MaxWorkers int
}

func (c Config) withDefaults() (Config, error) {
	if c.MaxSize == 0 {
		c.MaxSize = DefaultMaxSize
	}
	if c.MaxFiles == 0 {
		c.MaxFiles = DefaultMaxFiles
	}
	if c.MonitorInterval == 0 {
		c.MonitorInterval = DefaultMonitorInterval
	}
	if c.MaxWorkers == 0 {
		c.MaxWorkers = DefaultMaxWorkers
	}
	var errs []error
	if c.MaxFiles < 2 {
		errs = append(errs, fmt.Errorf("containerLogMaxFiles must be at least 2, got %d", c.MaxFiles))
	}
	if c.MonitorInterval < 0 {
		errs = append(errs, fmt.Errorf("containerLogMonitorInterval must be positive, got %v", c.MonitorInterval))
	}
	if c.MaxWorkers < 0 {
		errs = append(errs, fmt.Errorf("containerLogMaxWorkers must be at least 1, got %d", c.MaxWorkers))
	}
	return c, errors.Join(errs...)
}

// Manager rotates the logs of the running containers. Its methods are safe
// for concurrent use; operations on one container are serialized.
type Manager struct {
	rs    internalapi.RuntimeService
	clock clock.WithTicker
	cfg   Config
	locks keyedLocks

	// paths holds the log path of each running container seen (a
	// container's log path never changes; "" logs nowhere), so a pass asks
	// the runtime for the status of new containers only. Entries of
	// containers no longer running are dropped at each pass.
	mu    sync.Mutex
	paths map[string]string
}

// New returns a Manager for cfg. It fails without cfg.Runtime or on an
// invalid configuration.
func New(cfg Config) (*Manager, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("logs: Config.Runtime is required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("container log manager: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Manager{rs: cfg.Runtime, clock: cfg.Clock, cfg: cfg, paths: map[string]string{}}, nil
}

// enabled tells whether log rotation is on.
func (m *Manager) enabled() bool { return m.cfg.MaxSize >= 0 }

// Run makes a rotation pass at once and then every MonitorInterval until
// ctx is done. It returns at once when rotation is disabled.
func (m *Manager) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if !m.enabled() {
		logger.V(2).Info("Container log rotation is disabled", "maxSize", m.cfg.MaxSize)
		return nil
	}
	logger.V(2).Info("Starting container log manager", "maxSize", m.cfg.MaxSize, "maxFiles", m.cfg.MaxFiles,
		"monitorInterval", m.cfg.MonitorInterval, "workers", m.cfg.MaxWorkers)
	ticker := m.clock.NewTicker(m.cfg.MonitorInterval)
	defer ticker.Stop()
	for {
		if err := m.RotateOnce(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Container log rotation failed")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// RotateOnce makes one rotation pass over the running containers, with up
// to MaxWorkers containers at once. A failure on one container does not stop
// the others; the returned error joins all failures.
func (m *Manager) RotateOnce(ctx context.Context) error {
	if !m.enabled() {
		return nil
	}
	containers, err := m.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		return fmt.Errorf("listing running containers: %w", err)
	}
	m.forgetPaths(containers)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	ids := make(chan string)
	for range min(m.cfg.MaxWorkers, len(containers)) {
		wg.Go(func() {
			for id := range ids {
				if err := m.processContainer(ctx, id); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("container %s: %w", id, err))
					mu.Unlock()
				}
			}
		})
	}
feed:
	for _, c := range containers {
		// The runtime filtered on state already; check again for runtimes
		// (and fakes) that ignore the filter.
		if c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		select {
		case ids <- c.GetId():
		case <-ctx.Done():
			break feed
		}
	}
	close(ids)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// forgetPaths drops the cached log paths of containers not in running.
func (m *Manager) forgetPaths(running []*runtimeapi.Container) {
	live := make(map[string]bool, len(running))
	for _, c := range running {
		if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			live[c.GetId()] = true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id := range m.paths {
		if !live[id] {
			delete(m.paths, id)
		}
	}
}

// logPath is the log path of the running container id ("" when it logs
// nowhere); running is false when it stopped or was removed since the list.
// The runtime is asked once per container.
func (m *Manager) logPath(ctx context.Context, id string) (path string, running bool, err error) {
	m.mu.Lock()
	path, ok := m.paths[id]
	m.mu.Unlock()
	if ok {
		return path, true, nil
	}
	resp, err := m.rs.ContainerStatus(ctx, id, false)
	if err != nil {
		if status.Code(err) == codes.NotFound {
			// Removed since the list: nothing to rotate.
			return "", false, nil
		}
		return "", false, fmt.Errorf("getting status: %w", err)
	}
	st := resp.GetStatus()
	if st == nil {
		return "", false, errors.New("runtime returned no container status")
	}
	if st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		// Exited since the list: it writes no more.
		return "", false, nil
	}
	m.mu.Lock()
	m.paths[id] = st.GetLogPath()
	m.mu.Unlock()
	return st.GetLogPath(), true, nil
}

// stopped tells whether container id no longer runs (a reopen failing
// because it exited since the list is no failure of the rotation).
func (m *Manager) stopped(ctx context.Context, id string) bool {
	resp, err := m.rs.ContainerStatus(ctx, id, false)
	if status.Code(err) == codes.NotFound {
		return true
	}
	return err == nil && resp.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING
}

// processContainer rotates the log of one container if it is big enough.
func (m *Manager) processContainer(ctx context.Context, id string) error {
	unlock := m.locks.lock(id)
	defer unlock()

	path, running, err := m.logPath(ctx, id)
	if err != nil || !running || path == "" {
		// Exited since the list, or logs nowhere.
		return err
	}
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		// Lost, e.g. a rename back that failed: have the runtime recreate
		// it, as upstream does.
		klog.FromContext(ctx).V(2).Info("Container log is missing; reopening it", "containerID", id, "path", path)
		if err := m.rs.ReopenContainerLog(ctx, id); err != nil {
			if m.stopped(ctx, id) {
				return nil
			}
			return fmt.Errorf("log %s is missing and reopening it failed: %w", path, err)
		}
		info, err = os.Stat(path)
	}
	if err != nil {
		return fmt.Errorf("stat of log: %w", err)
	}
	if info.Size() < m.cfg.MaxSize {
		return nil
	}
	return m.rotate(ctx, id, path, info.Size())
}

// rotate rotates the log at path of container id.
func (m *Manager) rotate(ctx context.Context, id, path string, size int64) error {
	logger := klog.FromContext(ctx)
	rotated, err := rotatedFiles(path)
	if err != nil {
		return err
	}
	if rotated, err = removeLeftovers(rotated); err != nil {
		return err
	}
	target := path + "." + m.clock.Now().Format(timestampFormat)
	if slices.Contains(rotated, target) || slices.Contains(rotated, target+compressSuffix) {
		// Rotated already within this second: renaming now would replace
		// (or, after compression, shadow) that file. Try again next pass.
		logger.V(4).Info("Container log rotation deferred: rotated file name taken", "containerID", id, "path", target)
		return nil
	}
	// The rotation adds one rotated file; keep at most MaxFiles-1.
	keep := m.cfg.MaxFiles - 2
	for len(rotated) > keep {
		if err := os.Remove(rotated[0]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing old rotated log: %w", err)
		}
		rotated = rotated[1:]
	}
	// Only the newest rotated file stays uncompressed, for readers that
	// still follow it; after this rotation that is target.
	for _, f := range rotated {
		if strings.HasSuffix(f, compressSuffix) {
			continue
		}
		if err := compress(f); err != nil {
			return err
		}
	}
	if err := os.Rename(path, target); err != nil {
		return fmt.Errorf("renaming log: %w", err)
	}
	if err := m.rs.ReopenContainerLog(ctx, id); err != nil {
		err = fmt.Errorf("reopening log %s: %w", path, err)
		// Put the log back so the next pass can try again; the runtime
		// still writes to it through its open descriptor.
		if rerr := os.Rename(target, path); rerr != nil {
			return errors.Join(err, fmt.Errorf("renaming rotated log back (its content now lives in %s): %w", target, rerr))
		}
		if m.stopped(ctx, id) {
			// Exited since the list: its log is complete as it is.
			return nil
		}
		return err
	}
	logger.V(2).Info("Rotated container log", "containerID", id, "path", path, "rotatedTo", target, "size", size)
	return nil
}

// Clean removes the rotated files of container id; it is called before the
// container is removed. The current log belongs to whoever removes the
// container and is left alone.
func (m *Manager) Clean(ctx context.Context, containerID string) error {
	unlock := m.locks.lock(containerID)
	defer unlock()

	resp, err := m.rs.ContainerStatus(ctx, containerID, false)
	if err != nil {
		return fmt.Errorf("getting status of container %s: %w", containerID, err)
	}
	if resp.GetStatus() == nil {
		return fmt.Errorf("runtime returned no status for container %s", containerID)
	}
	path := resp.GetStatus().GetLogPath()
	if path == "" {
		return nil
	}
	files, err := rotatedFiles(path)
	if err != nil {
		return fmt.Errorf("container %s: %w", containerID, err)
	}
	var errs []error
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("removing rotated logs of container %s: %w", containerID, errors.Join(errs...))
	}
	return nil
}

// rotatedFiles returns the files "<path>.*", sorted by name, which for
// rotated logs is oldest first.
func rotatedFiles(path string) ([]string, error) {
	dir, prefix := filepath.Dir(path), filepath.Base(path)+"."
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing rotated logs: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		out = append(out, filepath.Join(dir, e.Name()))
	}
	slices.Sort(out)
	return out, nil
}

// removeLeftovers removes what an interrupted rotation left behind (a
// compression's .tmp file; a file whose compressed copy is complete) and
// returns the files left.
func removeLeftovers(files []string) ([]string, error) {
	var kept []string
	for _, f := range files {
		leftover := strings.HasSuffix(f, tmpSuffix) ||
			(!strings.HasSuffix(f, compressSuffix) && slices.Contains(files, f+compressSuffix))
		if !leftover {
			kept = append(kept, f)
			continue
		}
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("removing leftover of an interrupted rotation: %w", err)
		}
	}
	return kept, nil
}

// compress replaces file by file.gz, through file.gz.tmp so that a
// half-written archive never carries the .gz name.
func compress(file string) (err error) {
	in, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("compressing rotated log: %w", err)
	}
	defer func() { _ = in.Close() }()
	info, err := in.Stat()
	if err != nil {
		return fmt.Errorf("compressing rotated log: %w", err)
	}
	tmp := file + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return fmt.Errorf("compressing rotated log: %w", err)
	}
	defer func() {
		if err != nil {
			_ = out.Close()
			_ = os.Remove(tmp)
		}
	}()
	zw := gzip.NewWriter(out)
	if _, err = io.Copy(zw, in); err != nil {
		return fmt.Errorf("compressing %s: %w", file, err)
	}
	if err = zw.Close(); err != nil {
		return fmt.Errorf("compressing %s: %w", file, err)
	}
	// The original goes away below: make the archive durable first.
	if err = out.Sync(); err != nil {
		return fmt.Errorf("compressing %s: %w", file, err)
	}
	if err = out.Close(); err != nil {
		return fmt.Errorf("compressing %s: %w", file, err)
	}
	if err = os.Rename(tmp, file+compressSuffix); err != nil {
		return fmt.Errorf("compressing %s: %w", file, err)
	}
	// From here a failure leaves file and file.gz, which the next pass
	// resolves by removing file.
	if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s after compressing it: %w", file, err)
	}
	return nil
}

// keyedLocks serializes the operations on one container.
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	mu   sync.Mutex
	refs int
}

// lock locks key and returns the unlock function.
func (k *keyedLocks) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()

	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
