package logs

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

var (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
)

// fakeRuntime implements the part of the CRI runtime service the manager
// uses; any other call panics on the nil embedded interface.
type fakeRuntime struct {
	internalapi.RuntimeService

	mu         sync.Mutex
	containers map[string]*runtimeapi.ContainerStatus
	listErr    error
	statusErr  error
	reopenErr  map[string]error
	filters    []*runtimeapi.ContainerFilter
	reopened   []string
	// statusHook, when set, runs inside ContainerStatus without the lock.
	statusHook func()
	// statusCalls counts ContainerStatus calls.
	statusCalls map[string]int
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{containers: map[string]*runtimeapi.ContainerStatus{}, reopenErr: map[string]error{}}
}

func (f *fakeRuntime) add(id string, state runtimeapi.ContainerState, logPath string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers[id] = &runtimeapi.ContainerStatus{Id: id, State: state, LogPath: logPath}
}

func (f *fakeRuntime) ListContainers(_ context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.filters = append(f.filters, filter)
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []*runtimeapi.Container
	for _, id := range slices.Sorted(maps.Keys(f.containers)) {
		st := f.containers[id]
		if filter.GetState() != nil && filter.GetState().GetState() != st.State {
			continue
		}
		out = append(out, &runtimeapi.Container{Id: id, State: st.State})
	}
	return out, nil
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	if f.statusHook != nil {
		f.statusHook()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.statusCalls == nil {
		f.statusCalls = map[string]int{}
	}
	f.statusCalls[id]++
	if f.statusErr != nil {
		return nil, f.statusErr
	}
	st, ok := f.containers[id]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "container %q not found", id)
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, State: st.State, LogPath: st.LogPath}}, nil
}

// ReopenContainerLog creates a new empty log file, as a runtime does.
func (f *fakeRuntime) ReopenContainerLog(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reopened = append(f.reopened, id)
	if err := f.reopenErr[id]; err != nil {
		return err
	}
	st, ok := f.containers[id]
	if !ok {
		return status.Errorf(codes.NotFound, "container %q not found", id)
	}
	fh, err := os.OpenFile(st.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	return fh.Close()
}

func (f *fakeRuntime) reopenCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reopened)
}

// t0 formats as "20240305-101112".
var t0 = time.Date(2024, 3, 5, 10, 11, 12, 0, time.Local)

func ts(t time.Time) string { return t.Format(timestampFormat) }

// writeFiles creates files in dir: a name ending in .gz gets its content
// gzip-compressed.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		data := []byte(content)
		if strings.HasSuffix(name, ".gz") {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			if _, err := zw.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			data = b.Bytes()
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o640); err != nil {
			t.Fatal(err)
		}
	}
}

// readFiles returns the files of dir with their content, gunzipped for a
// name ending in .gz (which fails the test if it is not valid gzip).
func readFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(e.Name(), ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("%s is not gzip: %v", e.Name(), err)
			}
			if data, err = io.ReadAll(zr); err != nil {
				t.Fatalf("%s: gunzip: %v", e.Name(), err)
			}
		}
		out[e.Name()] = string(data)
	}
	return out
}

func TestNewConfig(t *testing.T) {
	rs := newFakeRuntime()
	for _, tc := range []struct {
		name    string
		rs      internalapi.RuntimeService
		cfg     Config
		want    Config
		wantErr string
		// realClock leaves Config.Clock nil: New takes the real clock.
		realClock bool
	}{
		{name: "zero takes defaults", rs: rs, cfg: Config{},
			want: Config{MaxSize: 10 * 1024 * 1024, MaxFiles: 5, MonitorInterval: 10 * time.Second, MaxWorkers: 1}},
		{name: "explicit values kept", rs: rs, cfg: Config{MaxSize: 1, MaxFiles: 2, MonitorInterval: time.Second, MaxWorkers: 4},
			want: Config{MaxSize: 1, MaxFiles: 2, MonitorInterval: time.Second, MaxWorkers: 4}},
		{name: "negative size disables", rs: rs, cfg: Config{MaxSize: -1},
			want: Config{MaxSize: -1, MaxFiles: 5, MonitorInterval: 10 * time.Second, MaxWorkers: 1}},
		{name: "one file", rs: rs, cfg: Config{MaxFiles: 1}, wantErr: "containerLogMaxFiles"},
		{name: "negative files", rs: rs, cfg: Config{MaxFiles: -3}, wantErr: "containerLogMaxFiles"},
		{name: "negative interval", rs: rs, cfg: Config{MonitorInterval: -time.Second}, wantErr: "containerLogMonitorInterval"},
		{name: "negative workers", rs: rs, cfg: Config{MaxWorkers: -1}, wantErr: "containerLogMaxWorkers"},
		{name: "no runtime", rs: nil, cfg: Config{}, wantErr: "Config.Runtime is required"},
		{name: "a nil clock is the real one", rs: rs, cfg: Config{}, realClock: true,
			want: Config{MaxSize: 10 * 1024 * 1024, MaxFiles: 5, MonitorInterval: 10 * time.Second, MaxWorkers: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Runtime = tc.rs
			if !tc.realClock {
				cfg.Clock = testingclock.NewFakeClock(t0)
			}
			m, err := New(cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one about %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, real := m.clock.(clock.RealClock); real != tc.realClock {
				t.Errorf("clock %T, want the real one: %v", m.clock, tc.realClock)
			}
			got := m.cfg
			got.Runtime, got.Clock = nil, nil
			if got != tc.want {
				t.Errorf("config %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRotateOnce(t *testing.T) {
	now := "20240305-101112" // t0 in upstream's format
	big := strings.Repeat("x", 10)
	for _, tc := range []struct {
		name       string
		maxFiles   int
		state      runtimeapi.ContainerState
		noLogPath  bool
		files      map[string]string // before, in the container's log dir
		reopenErr  error
		want       map[string]string // after; .gz content is the gunzipped one
		wantReopen bool
		wantErr    string
	}{
		{
			name:  "under the size left alone",
			files: map[string]string{"0.log": "123456789", "0.log.20240101-000000": "old"},
			want:  map[string]string{"0.log": "123456789", "0.log.20240101-000000": "old"},
		},
		{
			name:       "at the size rotated",
			files:      map[string]string{"0.log": big},
			want:       map[string]string{"0.log": "", "0.log." + now: big},
			wantReopen: true,
		},
		{
			name:       "over the size rotated",
			files:      map[string]string{"0.log": big + "more"},
			want:       map[string]string{"0.log": "", "0.log." + now: big + "more"},
			wantReopen: true,
		},
		{
			name: "previous rotated file compressed, new one not",
			files: map[string]string{
				"0.log":                    big,
				"0.log.20240101-000000.gz": "oldest",
				"0.log.20240102-000000":    "previous",
			},
			want: map[string]string{
				"0.log":                    "",
				"0.log.20240101-000000.gz": "oldest",
				"0.log.20240102-000000.gz": "previous",
				"0.log." + now:             big,
			},
			wantReopen: true,
		},
		{
			name:     "oldest removed down to MaxFiles",
			maxFiles: 3,
			files: map[string]string{
				"0.log":                    big,
				"0.log.20240101-000000.gz": "one",
				"0.log.20240102-000000.gz": "two",
				"0.log.20240103-000000":    "three",
			},
			want: map[string]string{
				"0.log":                    "",
				"0.log.20240103-000000.gz": "three",
				"0.log." + now:             big,
			},
			wantReopen: true,
		},
		{
			name:     "MaxFiles 2 keeps only the new rotated file",
			maxFiles: 2,
			files: map[string]string{
				"0.log":                 big,
				"0.log.20240103-000000": "three",
			},
			want:       map[string]string{"0.log": "", "0.log." + now: big},
			wantReopen: true,
		},
		{
			name: "leftovers of an interrupted compression removed",
			files: map[string]string{
				"0.log":                        big,
				"0.log.20240101-000000.gz.tmp": "half-written",
				"0.log.20240101-000000":        "uncompressed",
				"0.log.20240102-000000.gz":     "done",
				"0.log.20240102-000000":        "done",
			},
			want: map[string]string{
				"0.log":                    "",
				"0.log.20240101-000000.gz": "uncompressed",
				"0.log.20240102-000000.gz": "done",
				"0.log." + now:             big,
			},
			wantReopen: true,
		},
		{
			name:  "other containers' files untouched",
			files: map[string]string{"0.log": big, "1.log": big, "1.log.20240101-000000": "x", "10.log": big},
			want: map[string]string{
				"0.log": "", "0.log." + now: big,
				"1.log": big, "1.log.20240101-000000": "x", "10.log": big,
			},
			wantReopen: true,
		},
		{
			name:       "reopen failure renames the log back",
			files:      map[string]string{"0.log": big},
			reopenErr:  errors.New("runtime says no"),
			want:       map[string]string{"0.log": big},
			wantReopen: true,
			wantErr:    "runtime says no",
		},
		{
			name:  "exited container left alone",
			state: exited,
			files: map[string]string{"0.log": big, "0.log.20240101-000000": "old"},
			want:  map[string]string{"0.log": big, "0.log.20240101-000000": "old"},
		},
		{
			name:       "missing log reopened",
			files:      map[string]string{"0.log.20240101-000000": "old"},
			want:       map[string]string{"0.log": "", "0.log.20240101-000000": "old"},
			wantReopen: true,
		},
		{
			name:      "no log path",
			noLogPath: true,
			files:     map[string]string{"0.log": big},
			want:      map[string]string{"0.log": big},
		},
		{
			name: "rotated already this second: deferred, nothing lost",
			files: map[string]string{
				"0.log":                big,
				"0.log." + now + ".gz": "earlier this second",
			},
			want: map[string]string{
				"0.log":                big,
				"0.log." + now + ".gz": "earlier this second",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			rs := newFakeRuntime()
			state := tc.state
			if state == runtimeapi.ContainerState_CONTAINER_CREATED { // unset
				state = running
			}
			logPath := filepath.Join(dir, "0.log")
			if tc.noLogPath {
				logPath = ""
			}
			rs.add("c1", state, logPath)
			if tc.reopenErr != nil {
				rs.reopenErr["c1"] = tc.reopenErr
			}
			maxFiles := tc.maxFiles
			if maxFiles == 0 {
				maxFiles = 5
			}
			m, err := New(Config{Runtime: rs, Clock: testingclock.NewFakeClock(t0), MaxSize: 10, MaxFiles: maxFiles})
			if err != nil {
				t.Fatal(err)
			}

			err = m.RotateOnce(context.Background())
			if tc.wantErr == "" && err != nil {
				t.Fatalf("RotateOnce: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("RotateOnce error %v, want one with %q", err, tc.wantErr)
			}
			if got := readFiles(t, dir); !maps.Equal(got, tc.want) {
				t.Errorf("files after the pass:\n got %q\nwant %q", got, tc.want)
			}
			if got := len(rs.reopenCalls()) > 0; got != tc.wantReopen {
				t.Errorf("ReopenContainerLog called: %v, want %v", got, tc.wantReopen)
			}
		})
	}
}

func TestRotateOnceListsRunningContainersOnly(t *testing.T) {
	rs := newFakeRuntime()
	m, err := New(Config{Runtime: rs, Clock: testingclock.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.RotateOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(rs.filters) != 1 || rs.filters[0].GetState().GetState() != running || rs.filters[0].GetState() == nil {
		t.Fatalf("ListContainers filters %v, want one on state RUNNING", rs.filters)
	}

	rs.listErr = errors.New("runtime down")
	if err := m.RotateOnce(context.Background()); err == nil || !strings.Contains(err.Error(), "runtime down") {
		t.Fatalf("RotateOnce error %v, want the list error", err)
	}
}

// TestRotationOverManyPasses writes to a log and rotates it pass after
// pass, checking the invariants: at most MaxFiles files, only the newest
// rotated one uncompressed, and the kept files hold the latest data.
func TestRotationOverManyPasses(t *testing.T) {
	const maxFiles = 3
	dir := t.TempDir()
	logPath := filepath.Join(dir, "0.log")
	rs := newFakeRuntime()
	rs.add("c1", running, logPath)
	clk := testingclock.NewFakeClock(t0)
	m, err := New(Config{Runtime: rs, Clock: clk, MaxSize: 4, MaxFiles: maxFiles})
	if err != nil {
		t.Fatal(err)
	}
	var written []string
	for i := range 6 {
		data := strings.Repeat(string(rune('a'+i)), 5)
		written = append(written, data)
		if err := os.WriteFile(logPath, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := m.RotateOnce(context.Background()); err != nil {
			t.Fatalf("pass %d: %v", i, err)
		}
		got := readFiles(t, dir)
		want := map[string]string{"0.log": ""}
		// The newest rotated file is plain, the older ones compressed.
		for j := i; j >= 0 && j > i-(maxFiles-1); j-- {
			name := "0.log." + ts(t0.Add(time.Duration(j)*time.Minute))
			if j != i {
				name += ".gz"
			}
			want[name] = written[j]
		}
		if !maps.Equal(got, want) {
			t.Fatalf("pass %d:\n got %q\nwant %q", i, got, want)
		}
		clk.Step(time.Minute)
	}
	if n := len(rs.reopenCalls()); n != 6 {
		t.Errorf("%d reopens, want 6", n)
	}
}

func TestCompressedContentAndMode(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "0.log")
	// Incompressible-ish, multi-block content.
	var b strings.Builder
	for i := range 20000 {
		b.WriteString(time.Duration(i * 7919).String())
		b.WriteByte('\n')
	}
	content := b.String()
	old := logPath + ".20240101-000000"
	if err := os.WriteFile(old, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logPath, []byte("0123456789"), 0o640); err != nil {
		t.Fatal(err)
	}
	rs := newFakeRuntime()
	rs.add("c1", running, logPath)
	m, err := New(Config{Runtime: rs, Clock: testingclock.NewFakeClock(t0), MaxSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.RotateOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := readFiles(t, dir)[filepath.Base(old)+".gz"]; got != content {
		t.Fatalf("gunzipped content differs: %d bytes, want %d", len(got), len(content))
	}
	fi, err := os.Stat(old + ".gz")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() >= int64(len(content)) {
		t.Errorf("compressed size %d not below the original %d", fi.Size(), len(content))
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("compressed mode %v, want the original's 0600", fi.Mode().Perm())
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the uncompressed original is still there: %v", err)
	}
}

// TestRotateOnceWorkers runs in a synctest bubble: each status call takes
// 20 ms of the bubble's fake time, which passes only once every worker is
// blocked, so all the workers allowed are in a call at once, and never more.
func TestRotateOnceWorkers(t *testing.T) {
	for _, workers := range []int{1, 3} {
		synctest.Test(t, func(t *testing.T) {
			dir := t.TempDir()
			rs := newFakeRuntime()
			for _, id := range []string{"a", "b", "c", "d", "e", "f", "g"} {
				p := filepath.Join(dir, id+".log")
				if err := os.WriteFile(p, []byte("0123456789"), 0o640); err != nil {
					t.Fatal(err)
				}
				rs.add(id, running, p)
			}
			var mu sync.Mutex
			inFlight, maxInFlight := 0, 0
			rs.statusHook = func() {
				mu.Lock()
				inFlight++
				maxInFlight = max(maxInFlight, inFlight)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				mu.Lock()
				inFlight--
				mu.Unlock()
			}
			m, err := New(Config{Runtime: rs, Clock: testingclock.NewFakeClock(t0), MaxSize: 10, MaxWorkers: workers})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.RotateOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := slices.Sorted(slices.Values(rs.reopenCalls())); !slices.Equal(got, []string{"a", "b", "c", "d", "e", "f", "g"}) {
				t.Errorf("workers %d: reopened %v, want every container once", workers, got)
			}
			mu.Lock()
			defer mu.Unlock()
			if maxInFlight != workers {
				t.Errorf("workers %d: %d containers processed at once", workers, maxInFlight)
			}
		})
	}
}

func TestClean(t *testing.T) {
	for _, tc := range []struct {
		name      string
		logPath   string // relative to the temp dir; "" for none
		statusErr error
		files     map[string]string
		want      map[string]string
		wantErr   string
	}{
		{
			name:    "rotated files removed, current and others kept",
			logPath: "0.log",
			files: map[string]string{
				"0.log": "current", "0.log.20240101-000000.gz": "a", "0.log.20240102-000000": "b",
				"0.log.20240102-000000.gz.tmp": "c", "1.log": "next", "1.log.20240101-000000": "d", "10.log": "e",
			},
			want: map[string]string{"0.log": "current", "1.log": "next", "1.log.20240101-000000": "d", "10.log": "e"},
		},
		{
			name:    "nothing rotated",
			logPath: "0.log",
			files:   map[string]string{"0.log": "current"},
			want:    map[string]string{"0.log": "current"},
		},
		{
			name:  "no log path removes nothing",
			files: map[string]string{"0.log": "current", "0.log.20240101-000000": "a", ".x": "dot file"},
			want:  map[string]string{"0.log": "current", "0.log.20240101-000000": "a", ".x": "dot file"},
		},
		{
			name:      "status error",
			logPath:   "0.log",
			statusErr: errors.New("runtime down"),
			files:     map[string]string{"0.log.20240101-000000": "a"},
			want:      map[string]string{"0.log.20240101-000000": "a"},
			wantErr:   "runtime down",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			rs := newFakeRuntime()
			logPath := ""
			if tc.logPath != "" {
				logPath = filepath.Join(dir, tc.logPath)
			}
			rs.add("c1", exited, logPath)
			rs.statusErr = tc.statusErr
			m, err := New(Config{Runtime: rs, Clock: testingclock.NewFakeClock(t0)})
			if err != nil {
				t.Fatal(err)
			}
			err = m.Clean(context.Background(), "c1")
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Clean: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Clean error %v, want one with %q", err, tc.wantErr)
			}
			if got := readFiles(t, dir); !maps.Equal(got, tc.want) {
				t.Errorf("files after Clean:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestDisabled(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "0.log")
	writeFiles(t, dir, map[string]string{"0.log": strings.Repeat("x", 100)})
	rs := newFakeRuntime()
	rs.add("c1", running, logPath)
	m, err := New(Config{Runtime: rs, Clock: testingclock.NewFakeClock(t0), MaxSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.RotateOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(rs.filters) != 0 || len(rs.reopenCalls()) != 0 {
		t.Errorf("disabled manager talked to the runtime: lists %d, reopens %v", len(rs.filters), rs.reopenCalls())
	}
	synctest.Test(t, func(t *testing.T) {
		done := make(chan struct{})
		go func() { m.Run(context.Background()); close(done) }()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Run of a disabled manager did not return")
		}
	})
}

// TestLogging checks one V(2) line per rotation and silence otherwise.
func TestLogging(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "0.log")
	writeFiles(t, dir, map[string]string{"0.log": "small"})
	rs := newFakeRuntime()
	rs.add("c1", running, logPath)
	rs.add("c2", exited, filepath.Join(dir, "1.log"))
	clk := testingclock.NewFakeClock(t0)
	m, err := New(Config{Runtime: rs, Clock: clk, MaxSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(10), ktesting.BufferLogs(true)))
	buf := logger.GetSink().(ktesting.Underlier).GetBuffer()
	ctx := klog.NewContext(context.Background(), logger)

	for range 3 {
		if err := m.RotateOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := buf.Data(); len(got) != 0 {
		t.Fatalf("steady state logged %d lines:\n%s", len(got), buf.String())
	}

	writeFiles(t, dir, map[string]string{"0.log": "0123456789"})
	if err := m.RotateOnce(ctx); err != nil {
		t.Fatal(err)
	}
	got := buf.Data()
	if len(got) != 1 || got[0].Message != "Rotated container log" || got[0].Verbosity != 2 || got[0].Type != ktesting.LogInfo {
		t.Fatalf("a rotation logged:\n%s\nwant one V(2) line", buf.String())
	}
}

// TestRun checks a pass at start and one per MonitorInterval, and that Run
// returns when its context is done. It runs in a synctest bubble, on the
// real clock, which is the bubble's fake one: synctest.Wait returns once
// Run waits for its next tick, so "no pass yet" is checked after Run did
// all it would do.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		logPath := filepath.Join(dir, "0.log")
		rs := newFakeRuntime()
		rs.add("c1", running, logPath)
		writeFiles(t, dir, map[string]string{"0.log": "0123456789"})
		m, err := New(Config{Runtime: rs, MaxSize: 10, MonitorInterval: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { m.Run(ctx); close(done) }()
		synctest.Wait()
		if n := len(rs.reopenCalls()); n != 1 {
			t.Fatalf("%d rotations at start, want 1", n)
		}

		writeFiles(t, dir, map[string]string{"0.log": "0123456789"})
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if n := len(rs.reopenCalls()); n != 1 {
			t.Fatalf("%d rotations before the interval elapsed, want 1", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := len(rs.reopenCalls()); n != 2 {
			t.Fatalf("%d rotations once the interval elapsed, want 2", n)
		}
		if _, err := os.Stat(logPath + "." + ts(start.Add(10*time.Second))); err != nil {
			t.Errorf("second rotation not named after the clock: %v", err)
		}

		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Run did not return after cancel")
		}
	})
}

func TestConcurrentCleanAndRotate(t *testing.T) {
	dir := t.TempDir()
	rs := newFakeRuntime()
	ids := []string{"a", "b", "c", "d"}
	for _, id := range ids {
		writeFiles(t, dir, map[string]string{id + ".log": "xx"})
		rs.add(id, running, filepath.Join(dir, id+".log"))
	}
	clk := testingclock.NewFakeClock(t0)
	m, err := New(Config{Runtime: rs, Clock: clk, MaxSize: 1, MaxWorkers: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for range 5 {
				_ = m.RotateOnce(ctx)
			}
		})
		wg.Go(func() {
			for range 5 {
				if err := m.Clean(ctx, "a"); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	// The clock stands still and a new log is empty: each container is
	// rotated exactly once however the passes interleave.
	if got := slices.Sorted(slices.Values(rs.reopenCalls())); !slices.Equal(got, ids) {
		t.Errorf("reopened %v, want each of %v once", got, ids)
	}
}

// A container's log path is asked of the runtime once, not at every pass;
// a container that stops and a new one are seen at the next pass.
func TestLogPathAskedOnce(t *testing.T) {
	dir := t.TempDir()
	rs := newFakeRuntime()
	rs.add("a", running, filepath.Join(dir, "a.log"))
	writeFiles(t, dir, map[string]string{"a.log": "x"})
	clk := testingclock.NewFakeClock(t0)
	m, err := New(Config{Runtime: rs, Clock: clk, MaxSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		if err := m.RotateOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := rs.statusCalls["a"]; n != 1 {
		t.Errorf("3 passes asked the status of a %d times, want 1", n)
	}
	// Its log grows: rotated with the path kept from the first pass.
	writeFiles(t, dir, map[string]string{"a.log": "12345"})
	if err := m.RotateOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rs.reopenCalls(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("reopened %v, want a", got)
	}
	// a stops, b starts: a is forgotten, b asked once.
	rs.add("a", exited, filepath.Join(dir, "a.log"))
	rs.add("b", running, filepath.Join(dir, "b.log"))
	writeFiles(t, dir, map[string]string{"b.log": "x"})
	for range 2 {
		if err := m.RotateOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if rs.statusCalls["b"] != 1 || len(m.paths) != 1 || m.paths["b"] == "" {
		t.Errorf("after a stopped and b started: b asked %d times, paths kept %v", rs.statusCalls["b"], m.paths)
	}
}

// A container that exits between the list and its rotation: the failed
// reopen is no error, the log is back where it was.
func TestRotationOfContainerThatExited(t *testing.T) {
	dir := t.TempDir()
	rs := newFakeRuntime()
	logPath := filepath.Join(dir, "a.log")
	rs.add("a", running, logPath)
	writeFiles(t, dir, map[string]string{"a.log": "x"})
	m, err := New(Config{Runtime: rs, Clock: testingclock.NewFakeClock(t0), MaxSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.RotateOnce(ctx); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"a.log": "12345"})
	// The list still shows it running (the path is cached), the runtime
	// refuses the reopen: it exited meanwhile.
	rs.reopenErr["a"] = status.Error(codes.FailedPrecondition, "container is not running")
	rs.statusHook = func() { rs.add("a", exited, logPath); rs.statusHook = nil }
	if err := m.RotateOnce(ctx); err != nil {
		t.Errorf("rotation of a container that exited meanwhile: %v", err)
	}
	if got := readFiles(t, dir); !maps.Equal(got, map[string]string{"a.log": "12345"}) {
		t.Errorf("files: %q, want the log back in place", got)
	}
}
