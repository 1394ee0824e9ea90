package file

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/source/manifest"
)

// Config configures a Source.
type Config struct {
	// Dir is the static pod directory.
	Dir string
	// NodeName suffixes pod names and seeds their UIDs.
	NodeName string
	// Period is fileCheckFrequency: how often the directory is re-read even
	// without a filesystem event.
	Period time.Duration
	// Clock drives the period; a fake one in tests.
	Clock clock.WithTicker
}

// Source reads the static pod directory. Updates carries the full set of pods
// each time it changes; the first send happens after the first read, even
// when the directory is empty or missing, so consumers know the source has
// been seen.
type Source struct {
	cfg     Config
	updates chan []*v1.Pod

	// Owned by the Run goroutine.
	files     map[string]*fileState
	seen      map[string]string // pod UID -> config.seen annotation
	last      []*v1.Pod
	sent      bool
	dirError  string
	dupLogged map[string]bool
	removed   map[string]bool // files removed or renamed away since the last scan
}

type fileState struct {
	mod  time.Time
	size int64
	pods []*v1.Pod // last good pods
	err  string    // last error logged, to log each distinct error once
}

// New returns a Source for cfg. It fails when cfg has no Dir or NodeName.
func New(cfg Config) (*Source, error) {
	switch {
	case cfg.Dir == "":
		return nil, errors.New("file: Config.Dir is required")
	case cfg.NodeName == "":
		return nil, errors.New("file: Config.NodeName is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Source{
		cfg:     cfg,
		updates: make(chan []*v1.Pod, 1),
		files:   map[string]*fileState{},
		seen:    map[string]string{},
		removed: map[string]bool{},
	}, nil
}

// Updates returns the channel of pod sets. Only the latest set matters: if
// the consumer is slow, an unread older set is replaced; except that a set
// without the pods of a removed manifest is always delivered before the
// next one (a manifest removed and written back at once restarts its pod,
// as upstream's).
func (s *Source) Updates() <-chan []*v1.Pod { return s.updates }

// Run reads the directory until ctx is done.
func (s *Source) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("source", "file", "path", s.cfg.Dir)
	ctx = klog.NewContext(ctx, logger)
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		logger.Error(err, "Cannot watch the static pod directory; relying on the periodic re-read")
		watcher = nil
	} else {
		defer watcher.Close()
	}
	watching := false
	ensureWatch := func() {
		if watcher == nil || watching {
			return
		}
		if err := watcher.Add(s.cfg.Dir); err == nil {
			watching = true
		}
	}
	ensureWatch()
	s.scan(ctx)

	ticker := s.cfg.Clock.NewTicker(s.cfg.Period)
	defer ticker.Stop()
	var events <-chan fsnotify.Event
	var errs <-chan error
	if watcher != nil {
		events, errs = watcher.Events, watcher.Errors
	}
	// Coalesce bursts of events (an editor writes, renames, chmods) into one
	// read shortly after the last of them.
	const settle = 50 * time.Millisecond
	var pending <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
			ensureWatch()
			s.scan(ctx)
		case ev := <-events:
			if ev.Name == s.cfg.Dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				watching = false
			}
			// As upstream: a manifest removed or renamed away is a pod
			// removed, even when a file of the same name (the same pod)
			// is back before the directory is read. Hidden files are not
			// manifests (a writer's temporary file renamed into place).
			if ev.Name != s.cfg.Dir && ev.Has(fsnotify.Remove|fsnotify.Rename) && !strings.HasPrefix(filepath.Base(ev.Name), ".") {
				s.removed[ev.Name] = true
			}
			if pending == nil {
				pending = s.cfg.Clock.After(settle)
			}
		case err := <-errs:
			logger.Error(err, "Static pod directory watch error")
		case <-pending:
			pending = nil
			s.scan(ctx)
		}
	}
}

// scan reads the directory and sends the pod set if it changed. Manifests
// removed since the last scan are forgotten first and, if that changes the
// set, the set without their pods is sent and kept until read before the
// directory's current set follows.
func (s *Source) scan(ctx context.Context) {
	logger := klog.FromContext(ctx)
	keep := false
	if len(s.removed) > 0 {
		for path := range s.removed {
			delete(s.files, path)
		}
		clear(s.removed)
		if without := s.collect(logger); s.sent && !podsEqual(s.last, without) {
			s.send(ctx, without, false)
			keep = true
		}
	}
	pods := s.read(logger)
	if s.sent && podsEqual(s.last, pods) {
		return
	}
	s.send(ctx, pods, keep)
}

// send puts pods on the channel, replacing an unread older set unless keep
// says the unread one must be delivered (then it waits for the consumer).
func (s *Source) send(ctx context.Context, pods []*v1.Pod, keep bool) {
	s.last, s.sent = pods, true
	if !keep {
		select {
		case <-s.updates:
		default:
		}
	}
	select {
	case s.updates <- pods:
	case <-ctx.Done():
	}
}

func (s *Source) read(logger klog.Logger) []*v1.Pod {
	entries, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		if msg := err.Error(); msg != s.dirError {
			s.dirError = msg
			if errors.Is(err, os.ErrNotExist) {
				logger.Info("Static pod directory does not exist; no static pods until it does")
			} else {
				logger.Error(err, "Cannot read the static pod directory")
			}
		}
		if !errors.Is(err, os.ErrNotExist) && s.sent {
			// Transient error: keep what we had.
			return s.last
		}
		s.files = map[string]*fileState{}
		return nil
	}
	s.dirError = ""
	present := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		// As upstream: hidden files (editors' swap files among them) are ignored.
		if strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(s.cfg.Dir, name)
		info, err := os.Stat(path) // follows symlinks
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		present[path] = true
		st := s.files[path]
		if st == nil {
			st = &fileState{}
			s.files[path] = st
		}
		if st.mod.Equal(info.ModTime()) && st.size == info.Size() && (st.pods != nil || st.err != "") {
			continue
		}
		st.mod, st.size = info.ModTime(), info.Size()
		s.load(logger, path, st)
	}
	for path := range s.files {
		if !present[path] {
			delete(s.files, path)
		}
	}
	return s.collect(logger)
}

// collect is the pod set of the files read, each pod annotated with when
// it was first seen, duplicates dropped, ordered by UID.
func (s *Source) collect(logger klog.Logger) []*v1.Pod {
	var pods []*v1.Pod
	seen := map[string]string{}
	for _, st := range s.files {
		for _, p := range st.pods {
			uid := string(p.UID)
			ts, ok := s.seen[uid]
			if !ok {
				ts = s.cfg.Clock.Now().UTC().Format(time.RFC3339Nano)
			}
			seen[uid] = ts
			p = p.DeepCopy() // what is sent is never touched again here
			p.Annotations[podspec.ConfigFirstSeenAnnotationKey] = ts
			pods = append(pods, p)
		}
	}
	s.seen = seen
	pods = s.dedupe(logger, pods)
	sort.Slice(pods, func(i, j int) bool { return pods[i].UID < pods[j].UID })
	return pods
}

func (s *Source) load(logger klog.Logger, path string, st *fileState) {
	data, err := os.ReadFile(path)
	var pods []*v1.Pod
	var warnings []string
	if err == nil {
		pods, warnings, err = manifest.Decode(data, podspec.Origin{Source: podspec.FileSource, Location: path}, s.cfg.NodeName)
	}
	if err != nil {
		if msg := err.Error(); msg != st.err {
			st.err = msg
			if st.pods != nil {
				logger.Error(err, "Invalid static pod manifest; keeping the pods it held before", "file", path)
			} else {
				logger.Error(err, "Invalid static pod manifest; ignoring it", "file", path)
			}
		}
		return
	}
	st.err = ""
	for _, w := range warnings {
		logger.Info("Static pod manifest has fields nodelet ignores", "file", path, "warning", w)
	}
	st.pods = pods
}

// dedupe drops pods whose name repeats one already seen: two files must not
// define the same pod.
func (s *Source) dedupe(logger klog.Logger, pods []*v1.Pod) []*v1.Pod {
	sort.Slice(pods, func(i, j int) bool { return pods[i].UID < pods[j].UID })
	names := map[string]bool{}
	uids := map[string]bool{}
	dups := map[string]bool{}
	out := pods[:0]
	for _, p := range pods {
		key := podspec.FullName(p)
		if names[key] || uids[string(p.UID)] {
			if !s.dupLogged[key] {
				logger.Error(nil, "Static pod defined twice; ignoring the duplicate", "pod", key, "uid", p.UID)
			}
			dups[key] = true
			continue
		}
		names[key], uids[string(p.UID)] = true, true
		out = append(out, p)
	}
	s.dupLogged = dups
	return out
}

func podsEqual(a, b []*v1.Pod) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !apiequality.Semantic.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}
