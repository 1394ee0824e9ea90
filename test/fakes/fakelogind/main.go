// Command fakelogind is the part of systemd-logind a kubelet's graceful
// node shutdown talks to, for machines without systemd (this one): on the
// system bus ($DBUS_SYSTEM_BUS_ADDRESS) it owns org.freedesktop.login1 and
// serves, on /org/freedesktop/login1, org.freedesktop.login1.Manager:
//
//   - Inhibit(what, who, why, mode) -> h: a lock, the write end of a pipe;
//     the lock is held until every copy of it is closed, as logind's FIFO;
//   - ListInhibitors() -> a(ssssuu): what systemd-inhibit --list shows;
//   - PowerOff(b) and Reboot(b): emit PrepareForShutdown(true), wait until
//     the "delay" shutdown locks are released or InhibitDelayMaxUSec passed,
//     then record that the machine would go down (it stays up);
//   - the properties InhibitDelayMaxUSec (from InhibitDelayMaxSec in
//     -conf and -conf-dir/*.conf, logind's default 5 s otherwise),
//     PreparingForShutdown and DelayInhibited;
//   - the signal PrepareForShutdown(b).
//
// It also owns org.freedesktop.systemd1 for one call: KillUnit of
// systemd-logind.service with SIGHUP, which re-reads the configuration, as
// the kubelet makes logind reload after raising InhibitDelayMaxSec.
//
// Every shutdown step is appended to -events as a JSON line (event, time,
// details), for tests to measure from. systemd's own clients (busctl,
// systemd-inhibit) speak to it: that is how its protocol is checked.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/introspect"
	"github.com/godbus/dbus/v5/prop"
)

const (
	logindName  = "org.freedesktop.login1"
	logindPath  = dbus.ObjectPath("/org/freedesktop/login1")
	logindIface = "org.freedesktop.login1.Manager"

	systemdName  = "org.freedesktop.systemd1"
	systemdPath  = dbus.ObjectPath("/org/freedesktop/systemd1")
	systemdIface = "org.freedesktop.systemd1.Manager"

	defaultInhibitDelay = 5 * time.Second
)

type inhibitor struct {
	what, who, why, mode string
	uid, pid             uint32
	released             chan struct{}
}

type logind struct {
	conn    *dbus.Conn
	props   *prop.Properties
	conf    string
	confDir string
	events  *os.File

	mu         sync.Mutex
	delay      time.Duration
	inhibitors map[*inhibitor]bool
	preparing  bool
}

func main() {
	conf := flag.String("conf", "/etc/systemd/logind.conf", "logind's configuration file")
	confDir := flag.String("conf-dir", "/etc/systemd/logind.conf.d", "logind's drop-in directory")
	events := flag.String("events", "", "file the shutdown steps are appended to (JSON lines)")
	flag.Parse()

	conn, err := dbus.ConnectSystemBus()
	if err != nil {
		log.Fatalf("connecting to the system bus: %v", err)
	}
	l := &logind{conn: conn, conf: *conf, confDir: *confDir, inhibitors: map[*inhibitor]bool{}}
	if *events != "" {
		if l.events, err = os.OpenFile(*events, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	l.delay = l.readDelay()
	if err := l.export(); err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{logindName, systemdName} {
		reply, err := conn.RequestName(name, dbus.NameFlagDoNotQueue)
		if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
			log.Fatalf("cannot own %s: %v (reply %v)", name, err, reply)
		}
	}
	if err := l.watchCancellations(); err != nil {
		log.Fatal(err)
	}
	log.Printf("fakelogind ready on the system bus, InhibitDelayMaxSec=%v", l.delay)
	l.record("Ready", map[string]any{"inhibitDelayMaxUSec": l.delay.Microseconds()})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}

func (l *logind) export() error {
	if err := l.conn.Export(l, logindPath, logindIface); err != nil {
		return err
	}
	var err error
	l.props, err = prop.Export(l.conn, logindPath, prop.Map{logindIface: {
		"InhibitDelayMaxUSec":  {Value: uint64(l.delay.Microseconds()), Emit: prop.EmitFalse},
		"PreparingForShutdown": {Value: false, Emit: prop.EmitFalse},
		"DelayInhibited":       {Value: "", Emit: prop.EmitFalse},
	}})
	if err != nil {
		return err
	}
	node := &introspect.Node{Name: string(logindPath), Interfaces: []introspect.Interface{
		introspect.IntrospectData, prop.IntrospectData,
		{Name: logindIface, Properties: l.props.Introspection(logindIface), Methods: []introspect.Method{
			{Name: "Inhibit", Args: []introspect.Arg{{Name: "what", Type: "s", Direction: "in"}, {Name: "who", Type: "s", Direction: "in"},
				{Name: "why", Type: "s", Direction: "in"}, {Name: "mode", Type: "s", Direction: "in"}, {Name: "pipe_fd", Type: "h", Direction: "out"}}},
			{Name: "ListInhibitors", Args: []introspect.Arg{{Name: "inhibitors", Type: "a(ssssuu)", Direction: "out"}}},
			{Name: "PowerOff", Args: []introspect.Arg{{Name: "interactive", Type: "b", Direction: "in"}}},
			{Name: "Reboot", Args: []introspect.Arg{{Name: "interactive", Type: "b", Direction: "in"}}},
		}, Signals: []introspect.Signal{{Name: "PrepareForShutdown", Args: []introspect.Arg{{Name: "start", Type: "b"}}}}},
	}}
	if err := l.conn.Export(introspect.NewIntrospectable(node), logindPath, "org.freedesktop.DBus.Introspectable"); err != nil {
		return err
	}
	return l.conn.Export(systemd{l}, systemdPath, systemdIface)
}

// record appends one shutdown step to the events file.
func (l *logind) record(event string, details map[string]any) {
	if l.events == nil {
		return
	}
	if details == nil {
		details = map[string]any{}
	}
	details["event"], details["time"] = event, time.Now().UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(details)
	_, _ = l.events.Write(append(b, '\n'))
}

// readDelay is InhibitDelayMaxSec from the configuration and its drop-ins
// (later files win), logind's default otherwise.
func (l *logind) readDelay() time.Duration {
	files := []string{l.conf}
	drop, _ := filepath.Glob(filepath.Join(l.confDir, "*.conf"))
	sort.Strings(drop)
	files = append(files, drop...)
	delay := defaultInhibitDelay
	for _, f := range files {
		if d, ok := inhibitDelayIn(f); ok {
			delay = d
		}
	}
	return delay
}

// inhibitDelayIn reads InhibitDelayMaxSec from the [Login] section of a
// logind configuration file (seconds, or a number with a time unit).
func inhibitDelayIn(path string) (time.Duration, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var d time.Duration
	found, login := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			login = line == "[Login]"
		case login:
			k, v, ok := strings.Cut(line, "=")
			if !ok || strings.TrimSpace(k) != "InhibitDelayMaxSec" {
				continue
			}
			v = strings.TrimSpace(v)
			if s, err := strconv.ParseFloat(v, 64); err == nil {
				d, found = time.Duration(s*float64(time.Second)), true
			} else if pd, err := time.ParseDuration(v); err == nil {
				d, found = pd, true
			}
		}
	}
	return d, found
}

// Inhibit takes a lock: the caller gets the write end of a pipe and the
// lock lasts until every copy of it is closed.
func (l *logind) Inhibit(sender dbus.Sender, what, who, why, mode string) (dbus.UnixFD, *dbus.Error) {
	if mode != "block" && mode != "delay" {
		return -1, dbus.MakeFailedError(fmt.Errorf("invalid mode %q", mode))
	}
	r, w, err := os.Pipe()
	if err != nil {
		return -1, dbus.MakeFailedError(err)
	}
	in := &inhibitor{what: what, who: who, why: why, mode: mode, released: make(chan struct{})}
	in.uid, in.pid = l.credentials(sender)
	l.mu.Lock()
	l.inhibitors[in] = true
	l.updateDelayInhibited()
	l.mu.Unlock()
	l.record("Inhibit", map[string]any{"what": what, "who": who, "why": why, "mode": mode, "pid": in.pid})
	go func() {
		_, _ = io.Copy(io.Discard, r)
		r.Close()
		l.mu.Lock()
		delete(l.inhibitors, in)
		l.updateDelayInhibited()
		l.mu.Unlock()
		close(in.released)
		l.record("InhibitorReleased", map[string]any{"who": who, "mode": mode, "pid": in.pid})
	}()
	// The reply carrying w is sent as soon as this returns (in this
	// goroutine); our copy goes a second later, so that the lock ends with
	// the caller's last copy.
	go func() {
		time.Sleep(time.Second)
		w.Close()
	}()
	return dbus.UnixFD(w.Fd()), nil
}

// credentials are the caller's uid and pid, as the bus knows them.
func (l *logind) credentials(sender dbus.Sender) (uid, pid uint32) {
	bus := l.conn.BusObject()
	_ = bus.Call("org.freedesktop.DBus.GetConnectionUnixUser", 0, string(sender)).Store(&uid)
	_ = bus.Call("org.freedesktop.DBus.GetConnectionUnixProcessID", 0, string(sender)).Store(&pid)
	return uid, pid
}

// updateDelayInhibited keeps DelayInhibited ("shutdown" while a delay
// lock on shutdown is held); l.mu held.
func (l *logind) updateDelayInhibited() {
	v := ""
	for in := range l.inhibitors {
		if in.mode == "delay" && strings.Contains(in.what, "shutdown") {
			v = "shutdown"
		}
	}
	l.props.SetMust(logindIface, "DelayInhibited", v)
}

type listed struct {
	What, Who, Why, Mode string
	UID, PID             uint32
}

// ListInhibitors lists the locks held.
func (l *logind) ListInhibitors() ([]listed, *dbus.Error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []listed{}
	for in := range l.inhibitors {
		out = append(out, listed{in.what, in.who, in.why, in.mode, in.uid, in.pid})
	}
	return out, nil
}

// PowerOff starts a shutdown as logind does with delay locks: it tells the
// system, waits for the delay locks or InhibitDelayMaxUSec, then records
// that the machine would go down now.
func (l *logind) PowerOff(interactive bool) *dbus.Error { return l.shutdown("PowerOff") }

// Reboot is PowerOff, for a reboot.
func (l *logind) Reboot(interactive bool) *dbus.Error { return l.shutdown("Reboot") }

func (l *logind) shutdown(action string) *dbus.Error {
	l.mu.Lock()
	if l.preparing {
		l.mu.Unlock()
		return dbus.NewError("org.freedesktop.login1.OperationInProgress", []any{"There's already a shutdown or sleep operation in progress"})
	}
	l.preparing = true
	var waits []chan struct{}
	for in := range l.inhibitors {
		if in.mode == "delay" && strings.Contains(in.what, "shutdown") {
			waits = append(waits, in.released)
		}
	}
	delay := l.delay
	l.mu.Unlock()
	l.props.SetMust(logindIface, "PreparingForShutdown", true)
	start := time.Now()
	l.record("PrepareForShutdown", map[string]any{"start": true, "action": action, "delayLocks": len(waits)})
	if err := l.conn.Emit(logindPath, logindIface+".PrepareForShutdown", true); err != nil {
		return dbus.MakeFailedError(err)
	}
	go func() {
		timeout := time.After(delay)
		released := true
		for _, w := range waits {
			select {
			case <-w:
			case <-timeout:
				released = false
			}
			if !released {
				break
			}
		}
		l.record(action, map[string]any{"locksReleased": released, "waitedSeconds": time.Since(start).Seconds()})
		log.Printf("%s now (delay locks released: %v, after %v); the machine stays up", action, released, time.Since(start).Round(time.Millisecond))
	}()
	return nil
}

// watchCancellations ends a shutdown in progress when anyone sends
// PrepareForShutdown(false) (tests cancel a shutdown so, as upstream's
// e2e test does), so that the next PowerOff starts a new one.
func (l *logind) watchCancellations() error {
	if err := l.conn.AddMatchSignal(dbus.WithMatchInterface(logindIface), dbus.WithMatchMember("PrepareForShutdown")); err != nil {
		return err
	}
	ch := make(chan *dbus.Signal, 8)
	l.conn.Signal(ch)
	go func() {
		for sig := range ch {
			if len(sig.Body) == 0 {
				continue
			}
			if b, ok := sig.Body[0].(bool); ok && !b {
				l.mu.Lock()
				l.preparing = false
				l.mu.Unlock()
				l.props.SetMust(logindIface, "PreparingForShutdown", false)
				l.record("PrepareForShutdown", map[string]any{"start": false})
			}
		}
	}()
	return nil
}

type systemd struct{ l *logind }

// KillUnit of systemd-logind.service with SIGHUP reloads the
// configuration, as it makes logind do.
func (s systemd) KillUnit(unit, who string, signal int32) *dbus.Error {
	if unit != "systemd-logind.service" {
		return dbus.NewError("org.freedesktop.systemd1.NoSuchUnit", []any{fmt.Sprintf("Unit %s not loaded.", unit)})
	}
	if signal != int32(syscall.SIGHUP) {
		return nil
	}
	s.l.mu.Lock()
	s.l.delay = s.l.readDelay()
	d := s.l.delay
	s.l.mu.Unlock()
	s.l.props.SetMust(logindIface, "InhibitDelayMaxUSec", uint64(d.Microseconds()))
	s.l.record("Reload", map[string]any{"inhibitDelayMaxUSec": d.Microseconds()})
	log.Printf("configuration reloaded: InhibitDelayMaxSec=%v", d)
	return nil
}
