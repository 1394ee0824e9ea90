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

// Logind is a private system bus (dbus-daemon) with hack/tools/fakelogind
// on it: what a kubelet's graceful shutdown talks to on a systemd machine.
type Logind struct {
	// Address is the bus's address: DBUS_SYSTEM_BUS_ADDRESS for clients.
	Address string
	// EventsFile has the fake's steps, one JSON object per line.
	EventsFile string
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
	for _, bin := range []string{"dbus-daemon", "busctl"} {
		if _, err := exec.LookPath(bin); err != nil {
			if InCI() {
				t.Fatalf("%s is missing: hack/stack-up.sh installs it", bin)
			}
			t.Skipf("%s is missing: run hack/stack-up.sh", bin)
		}
	}
	removeDrop := func() {
		if err := os.Remove(LogindConfDrop); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("removing %s: %v", LogindConfDrop, err)
		}
	}
	removeDrop()
	t.Cleanup(removeDrop)
	dir := t.TempDir()
	sock := filepath.Join(dir, "system_bus_socket")
	conf := filepath.Join(dir, "bus.conf")
	writeFile(t, conf, fmt.Sprintf(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
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
`, sock))
	l := &Logind{Address: "unix:path=" + sock, EventsFile: filepath.Join(dir, "events.jsonl")}
	daemon := startProcess(t, filepath.Join(dir, "dbus-daemon.log"), nil, "dbus-daemon", "--config-file="+conf, "--nofork")
	Eventually(t, 10*time.Second, 20*time.Millisecond, func() bool { _, err := os.Stat(sock); return err == nil }, "dbus-daemon did not listen on %s", sock)
	if confFile == "" {
		confFile = filepath.Join(dir, "logind.conf") // none
	}
	startProcess(t, filepath.Join(dir, "fakelogind.log"), []string{"DBUS_SYSTEM_BUS_ADDRESS=" + l.Address},
		ToolBinary(t, "./hack/tools/fakelogind"), "-conf", confFile, "-conf-dir", filepath.Dir(LogindConfDrop), "-events", l.EventsFile)
	Eventually(t, 10*time.Second, 20*time.Millisecond, func() bool { return len(l.Events(t)) > 0 }, "fakelogind did not start")
	_ = daemon
	return l
}

// startProcess starts a helper process logging to logFile; it is stopped
// (SIGTERM, then SIGKILL) when the test ends, its log shown if it failed.
func startProcess(t testing.TB, logFile string, env []string, name string, args ...string) *exec.Cmd {
	t.Helper()
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("%s log:\n%s", filepath.Base(name), tail(string(b), 40))
		}
	})
	return cmd
}

// Env is the environment a client of the bus needs.
func (l *Logind) Env() []string { return []string{"DBUS_SYSTEM_BUS_ADDRESS=" + l.Address} }

// Events are the fake's steps so far.
func (l *Logind) Events(t testing.TB) []LogindEvent {
	t.Helper()
	f, err := os.Open(l.EventsFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []LogindEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e LogindEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("events line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
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
	conn, err := dbus.Connect(l.Address)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Emit("/org/freedesktop/login1", "org.freedesktop.login1.Manager.PrepareForShutdown", b); err != nil {
		t.Fatal(err)
	}
}

var (
	toolsMu sync.Mutex
	tools   = map[string]string{}
)

// ToolBinary builds the repository's package pkg (./hack/tools/x) once per
// test binary and returns its path.
func ToolBinary(t testing.TB, pkg string) string {
	t.Helper()
	toolsMu.Lock()
	defer toolsMu.Unlock()
	if p, ok := tools[pkg]; ok {
		return p
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "nodelet-e2e-tool-")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", p, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	tools[pkg] = p
	return p
}
