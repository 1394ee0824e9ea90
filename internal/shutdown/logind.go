package shutdown

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/godbus/dbus/v5"
)

// The logind and systemd names upstream's nodeshutdown/systemd uses.
const (
	logindService   = "org.freedesktop.login1"
	logindObject    = dbus.ObjectPath("/org/freedesktop/login1")
	logindInterface = "org.freedesktop.login1.Manager"

	systemdService   = "org.freedesktop.systemd1"
	systemdObject    = dbus.ObjectPath("/org/freedesktop/systemd1")
	systemdInterface = "org.freedesktop.systemd1.Manager"

	// LogindConfDir and LogindConfFile are where the kubelet raises
	// logind's InhibitDelayMaxSec when it is below the time asked for.
	LogindConfDir  = "/etc/systemd/logind.conf.d"
	LogindConfFile = "99-kubelet.conf"
)

// Logind is what the manager needs of systemd-logind.
type Logind interface {
	// InhibitDelay is logind's InhibitDelayMaxUSec: the longest a delay
	// lock holds a shutdown back.
	InhibitDelay() (time.Duration, error)
	// Inhibit takes a "delay" lock on shutdown: the shutdown waits until
	// the returned file is closed (or the delay passes).
	Inhibit() (*os.File, error)
	// RaiseInhibitDelay writes a logind drop-in with InhibitDelayMaxSec d
	// and makes logind reload its configuration.
	RaiseInhibitDelay(d time.Duration) error
	// PreparingForShutdown is logind's property of that name: whether a
	// shutdown is under way (what was missed while not connected).
	PreparingForShutdown() (bool, error)
	// PrepareForShutdown gives logind's PrepareForShutdown signals: true
	// when a shutdown starts, false when it is cancelled. Closed when the
	// bus connection ends.
	PrepareForShutdown() (<-chan bool, error)
	Close() error
}

// callTimeout bounds every call to logind and systemd: a hung daemon must
// not hold the manager.
const callTimeout = 10 * time.Second

// DBusLogind is Logind over the system bus ($DBUS_SYSTEM_BUS_ADDRESS, else
// /run/dbus/system_bus_socket).
type DBusLogind struct {
	conn *dbus.Conn
	// ConfDir is where RaiseInhibitDelay writes (LogindConfDir).
	ConfDir string
}

// ConnectLogind connects to the system bus.
func ConnectLogind() (*DBusLogind, error) {
	conn, err := dbus.ConnectSystemBus()
	if err != nil {
		return nil, fmt.Errorf("connecting to the system bus: %w", err)
	}
	return &DBusLogind{conn: conn, ConfDir: LogindConfDir}, nil
}

// call calls method on obj within callTimeout.
func (l *DBusLogind) call(obj dbus.BusObject, method string, args ...any) *dbus.Call {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return obj.CallWithContext(ctx, method, 0, args...)
}

// property is one of logind's Manager properties.
func (l *DBusLogind) property(name string) (dbus.Variant, error) {
	var v dbus.Variant
	err := l.call(l.conn.Object(logindService, logindObject), "org.freedesktop.DBus.Properties.Get", logindInterface, name).Store(&v)
	return v, err
}

// InhibitDelay implements Logind.
func (l *DBusLogind) InhibitDelay() (time.Duration, error) {
	v, err := l.property("InhibitDelayMaxUSec")
	if err != nil {
		return 0, fmt.Errorf("failed reading InhibitDelayMaxUSec property from logind: %w", err)
	}
	usec, ok := v.Value().(uint64)
	if !ok {
		return 0, fmt.Errorf("InhibitDelayMaxUSec from logind is a %T, not a uint64", v.Value())
	}
	return time.Duration(usec) * time.Microsecond, nil
}

// Inhibit implements Logind with upstream's who and why.
func (l *DBusLogind) Inhibit() (*os.File, error) {
	call := l.call(l.conn.Object(logindService, logindObject), logindInterface+".Inhibit",
		"shutdown", "kubelet", "Kubelet needs time to handle node shutdown", "delay")
	if call.Err != nil {
		return nil, fmt.Errorf("failed creating systemd inhibitor: %w", call.Err)
	}
	var fd dbus.UnixFD
	if err := call.Store(&fd); err != nil {
		return nil, fmt.Errorf("failed storing inhibit lock file descriptor: %w", err)
	}
	return os.NewFile(uintptr(fd), "logind-inhibitor"), nil
}

// RaiseInhibitDelay implements Logind as upstream: a drop-in, then
// SIGHUP to systemd-logind.service through systemd.
func (l *DBusLogind) RaiseInhibitDelay(d time.Duration) error {
	if err := os.MkdirAll(l.ConfDir, 0o755); err != nil {
		return fmt.Errorf("failed creating %v directory: %w", l.ConfDir, err)
	}
	conf := fmt.Sprintf("# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=%.0f\n", d.Seconds())
	path := filepath.Join(l.ConfDir, LogindConfFile)
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return fmt.Errorf("failed writing logind shutdown inhibit override file %v: %w", path, err)
	}
	call := l.call(l.conn.Object(systemdService, systemdObject), systemdInterface+".KillUnit", "systemd-logind.service", "all", int32(1))
	if call.Err != nil {
		return fmt.Errorf("unable to reload logind conf: %w", call.Err)
	}
	return nil
}

// PreparingForShutdown implements Logind.
func (l *DBusLogind) PreparingForShutdown() (bool, error) {
	v, err := l.property("PreparingForShutdown")
	if err != nil {
		return false, err
	}
	b, ok := v.Value().(bool)
	if !ok {
		return false, fmt.Errorf("PreparingForShutdown from logind is a %T, not a bool", v.Value())
	}
	return b, nil
}

// PrepareForShutdown implements Logind.
func (l *DBusLogind) PrepareForShutdown() (<-chan bool, error) {
	if err := l.conn.AddMatchSignal(dbus.WithMatchInterface(logindInterface), dbus.WithMatchMember("PrepareForShutdown"),
		dbus.WithMatchObjectPath(logindObject)); err != nil {
		return nil, err
	}
	in := make(chan *dbus.Signal, 4)
	l.conn.Signal(in)
	out := make(chan bool, 1)
	go func() {
		defer close(out)
		for s := range in {
			if s == nil || s.Name != logindInterface+".PrepareForShutdown" || len(s.Body) == 0 {
				continue
			}
			if b, ok := s.Body[0].(bool); ok {
				select {
				case out <- b:
				case <-l.conn.Context().Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// Close implements Logind.
func (l *DBusLogind) Close() error {
	if l.conn == nil {
		return errors.New("not connected")
	}
	return l.conn.Close()
}
