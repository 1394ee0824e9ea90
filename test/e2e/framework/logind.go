package framework

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// LogindConfDrop is the drop-in the kubelet writes to raise logind's
// InhibitDelayMaxSec (upstream's path; the fake logind reads it too).
const LogindConfDrop = "/etc/systemd/logind.conf.d/99-kubelet.conf"

// Logind is a private system bus (dbus-daemon) with test/fakes/fakelogind
// on it: what a kubelet's graceful shutdown talks to on a systemd machine.
type Logind struct {
	// Address is the bus's address: DBUS_SYSTEM_BUS_ADDRESS for clients.
	Address string
	// EventsFile has the fake's steps, one JSON object per line.
	EventsFile string

	procs []proc
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// LogindEvent is one line of the fake's events file.
type LogindEvent struct {
	Event         string    `json:"event"`
	Time          time.Time `json:"time"`
	Who           string    `json:"who"`
	Mode          string    `json:"mode"`
	LocksReleased *bool     `json:"locksReleased"`
	DelayUSec     int64     `json:"inhibitDelayMaxUSec"`
}

// StartLogind starts the bus and the fake logind (InhibitDelayMaxSec from
// confFile, "" for logind's default 5 s, and from LogindConfDrop, which is
// removed before and after). Both stop when the test ends.
func StartLogind(t testing.TB, confFile string) *Logind {
	t.Helper()
	for _, bin := range []string{"dbus-daemon", "busctl", "systemd-inhibit"} {
		if _, err := exec.LookPath(bin); err != nil {
			if InCI() {
				t.Fatalf("%s is missing: hack/stack-up.sh installs it", bin)
			}
			t.Skipf("%s is missing: run hack/stack-up.sh", bin)
		}
	}
	bin, err := BuildTool("./test/fakes/fakelogind")
	if err != nil {
		t.Fatal(err)
	}
	l, err := LaunchLogind(t.TempDir(), bin, confFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if logs := l.Stop(); t.Failed() {
			t.Logf("bus and fake logind logs:\n%s", logs)
		}
	})
	return l
}

// LaunchLogind starts the bus and the fake logind (binary bin) with their
// files in dir; Stop stops them. LogindConfDrop is removed first and by
// Stop.
func LaunchLogind(dir, bin, confFile string) (*Logind, error) {
	if err := os.Remove(LogindConfDrop); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	sock := filepath.Join(dir, "system_bus_socket")
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow send_type="signal"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
`, sock)), 0o644); err != nil {
		return nil, err
	}
	l := &Logind{Address: "unix:path=" + sock, EventsFile: filepath.Join(dir, "events.jsonl")}
	fail := func(err error) (*Logind, error) {
		logs := l.Stop()
		return nil, fmt.Errorf("%w\n%s", err, logs)
	}
	if err := l.start(filepath.Join(dir, "dbus-daemon.log"), nil, "dbus-daemon", "--config-file="+conf, "--nofork"); err != nil {
		return fail(err)
	}
	if !waitFor(10*time.Second, func() bool { _, err := os.Stat(sock); return err == nil }) {
		return fail(fmt.Errorf("dbus-daemon did not listen on %s", sock))
	}
	if confFile == "" {
		confFile = filepath.Join(dir, "logind.conf") // none
	}
	if err := l.start(filepath.Join(dir, "fakelogind.log"), l.Env(), bin,
		"-conf", confFile, "-conf-dir", filepath.Dir(LogindConfDrop), "-events", l.EventsFile); err != nil {
		return fail(err)
	}
	if !waitFor(10*time.Second, func() bool { evs, _ := l.ReadEvents(); return len(evs) > 0 }) {
		return fail(errors.New("fakelogind did not start"))
	}
	return l, nil
}

func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// start starts a helper process logging to logFile.
func (l *Logind) start(logFile string, env []string, name string, args ...string) error {
	f, err := os.Create(logFile)
	if err != nil {
		return err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	l.procs = append(l.procs, proc{cmd: cmd, done: done, log: logFile})
	return nil
}

// Stop stops the fake logind and the bus (SIGTERM, then SIGKILL), removes
// LogindConfDrop and returns their logs' ends.
func (l *Logind) Stop() string {
	var logs strings.Builder
	for i := len(l.procs) - 1; i >= 0; i-- {
		p := l.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		b, _ := os.ReadFile(p.log)
		fmt.Fprintf(&logs, "== %s\n%s\n", filepath.Base(p.log), tail(string(b), 40))
	}
	l.procs = nil
	_ = os.Remove(LogindConfDrop)
	return logs.String()
}

// Env is the environment a client of the bus needs.
func (l *Logind) Env() []string { return []string{"DBUS_SYSTEM_BUS_ADDRESS=" + l.Address} }

// Events are the fake's steps so far.
func (l *Logind) Events(t testing.TB) []LogindEvent {
	t.Helper()
	evs, err := l.ReadEvents()
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// ReadEvents reads the fake's steps so far.
func (l *Logind) ReadEvents() ([]LogindEvent, error) {
	f, err := os.Open(l.EventsFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []LogindEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e LogindEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("events line %q: %w", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Busctl runs systemd's busctl on the bus.
func (l *Logind) Busctl(t testing.TB, args ...string) string {
	t.Helper()
	return l.run(t, "busctl", append([]string{"--system"}, args...)...)
}

func (l *Logind) run(t testing.TB, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), l.Env()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Inhibitors is systemd-inhibit --list's output.
func (l *Logind) Inhibitors(t testing.TB) string {
	t.Helper()
	return l.run(t, "systemd-inhibit", "--list", "--no-pager")
}

// PowerOff asks logind to power the machine off, as systemctl poweroff
// does: PrepareForShutdown(true), then the wait for the delay locks.
func (l *Logind) PowerOff(t testing.TB) {
	t.Helper()
	l.Busctl(t, "call", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.login1.Manager", "PowerOff", "b", "false")
}

// Emit sends PrepareForShutdown(b) on the bus itself, as upstream's e2e
// test does (emitSignalPrepareForShutdown).
func (l *Logind) Emit(t testing.TB, b bool) {
	t.Helper()
	if err := l.EmitSignal(b); err != nil {
		t.Fatal(err)
	}
}

// EmitSignal is Emit without a test.
func (l *Logind) EmitSignal(b bool) error {
	conn, err := dbus.Connect(l.Address)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Emit("/org/freedesktop/login1", "org.freedesktop.login1.Manager.PrepareForShutdown", b)
}

// CallPowerOff calls logind's PowerOff(false) over the bus, as systemctl
// poweroff does.
func (l *Logind) CallPowerOff() error {
	conn, err := dbus.Connect(l.Address)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Object("org.freedesktop.login1", "/org/freedesktop/login1").Call("org.freedesktop.login1.Manager.PowerOff", 0, false).Err
}

var (
	toolsMu sync.Mutex
	tools   = map[string]string{}
)

// BuildTool builds the repository's package pkg (./test/fakes/x), in the
// module that holds it, once per process and returns the binary's path.
func BuildTool(pkg string) (string, error) {
	toolsMu.Lock()
	defer toolsMu.Unlock()
	if p, ok := tools[pkg]; ok {
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	mod, rel, err := moduleOf(root, pkg)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "nodelet-tool-")
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", p, rel)
	cmd.Dir = mod
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	tools[pkg] = p
	return p, nil
}

// moduleOf returns the directory of the module holding the package pkg
// (a path relative to the repository's root, the nearest go.mod above it)
// and pkg's path relative to that directory.
func moduleOf(root, pkg string) (mod, rel string, err error) {
	dir := filepath.Join(root, pkg)
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			r, err := filepath.Rel(d, dir)
			if err != nil {
				return "", "", err
			}
			return d, "./" + r, nil
		}
		if d == root || d == filepath.Dir(d) {
			return "", "", fmt.Errorf("no go.mod holds %s", pkg)
		}
	}
}
