package pluginwatcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/clock"
)

// Timeouts of the calls to a plugin, as upstream's.
const (
	dialTimeout    = 10 * time.Second
	getInfoTimeout = time.Second
	notifyTimeout  = 5 * time.Second
)

// Handler registers the plugins of one type (upstream's PluginHandler).
type Handler interface {
	// ValidatePlugin says whether a plugin may register (its versions).
	ValidatePlugin(name, endpoint string, versions []string) error
	// RegisterPlugin makes it known (a CSI driver: NodeGetInfo, CSINode).
	RegisterPlugin(ctx context.Context, name, endpoint string, versions []string) error
	// DeRegisterPlugin forgets it: its socket went.
	DeRegisterPlugin(name, endpoint string)
}

// Config configures a Manager.
type Config struct {
	// Dir is the registration folder, <root-dir>/plugins_registry.
	Dir string
	// Handlers by plugin type (registerapi.CSIPlugin ...).
	Handlers map[string]Handler
	Clock    clock.WithTicker
	// Period is how often the folder is read besides its events (1 s).
	Period time.Duration
}

// Manager registers the plugins whose sockets appear in Dir.
type Manager struct {
	cfg Config

	mu    sync.Mutex
	state map[string]*socketState
}

// New returns a Manager for cfg. It fails without Dir or Handlers.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Dir == "":
		return nil, errors.New("plugins: Config.Dir is required")
	case len(cfg.Handlers) == 0:
		return nil, errors.New("plugins: Config.Handlers is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Period <= 0 {
		cfg.Period = time.Second
	}
	return &Manager{cfg: cfg, state: map[string]*socketState{}}, nil
}

// Registered are the registered plugins' names by socket path.
func (m *Manager) Registered() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]string{}
	for p, st := range m.state {
		if st.registered {
			out[p] = st.name
		}
	}
	return out
}

// Run watches Dir until ctx is done.
func (m *Manager) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if err := os.MkdirAll(m.cfg.Dir, 0o750); err != nil {
		logger.Error(err, "Cannot create the plugin registration folder", "path", m.cfg.Dir)
	}
	events := make(chan struct{}, 1)
	if w, err := fsnotify.NewWatcher(); err != nil {
		logger.Error(err, "Cannot watch the plugin registration folder; reading it every period", "path", m.cfg.Dir)
	} else {
		defer w.Close()
		go forward(w, events)
		m.watchTree(logger, w)
	}
	t := m.cfg.Clock.NewTicker(m.cfg.Period)
	defer t.Stop()
	for {
		m.reconcile(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-events:
		case <-t.C():
		}
	}
}

// forward turns fsnotify's events into wake-ups.
func forward(w *fsnotify.Watcher, out chan<- struct{}) {
	for {
		select {
		case _, ok := <-w.Events:
			if !ok {
				return
			}
		case _, ok := <-w.Errors:
			if !ok {
				return
			}
		}
		select {
		case out <- struct{}{}:
		default:
		}
	}
}

// watchTree adds Dir and its folders to w (new folders are added as the
// reconciliation finds them).
func (m *Manager) watchTree(logger klog.Logger, w *fsnotify.Watcher) {
	_ = filepath.WalkDir(m.cfg.Dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if err := w.Add(p); err != nil {
				logger.V(2).Info("Cannot watch a plugin folder", "path", p, "err", err)
			}
		}
		return nil
	})
}

// sockets are the plugin sockets under Dir: unix sockets, names starting
// with a dot ignored (and folders so named skipped), as upstream.
func sockets(dir string) map[string]time.Time {
	out := map[string]time.Time{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type()&fs.ModeSocket != 0 {
			if fi, err := d.Info(); err == nil {
				out[p] = fi.ModTime()
			}
		}
		return nil
	})
	return out
}

// reconcile registers, retries and deregisters as plan says.
func (m *Manager) reconcile(ctx context.Context) {
	logger := klog.FromContext(ctx)
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	found := sockets(m.cfg.Dir)
	a := plan(found, m.state, now)
	for _, p := range a.forget {
		delete(m.state, p)
	}
	var gone []*socketState
	for _, p := range a.deregister {
		gone = append(gone, m.state[p])
		delete(m.state, p)
	}
	m.mu.Unlock()
	for i, p := range a.deregister {
		st := gone[i]
		if h := m.cfg.Handlers[st.kind]; h != nil {
			h.DeRegisterPlugin(st.name, p)
		}
		logger.Info("Plugin deregistered: its socket is gone", "plugin", st.name, "type", st.kind, "path", p)
	}
	for _, p := range a.register {
		name, kind, err := m.register(ctx, p)
		m.mu.Lock()
		st := m.state[p]
		if st == nil {
			st = &socketState{}
			m.state[p] = st
		}
		if err != nil {
			st.failures++
			st.next = m.cfg.Clock.Now().Add(backoff(st.failures))
			logger.Error(err, "Plugin registration failed; retrying", "path", p, "failures", st.failures, "retryIn", backoff(st.failures))
		} else {
			*st = socketState{registered: true, name: name, kind: kind, mtime: found[p]}
			logger.Info("Plugin registered", "plugin", name, "type", kind, "path", p)
		}
		m.mu.Unlock()
	}
}

// register dials the socket, asks for the plugin's info, validates and
// registers it with its type's handler and tells the plugin, with
// upstream's messages.
func (m *Manager) register(ctx context.Context, path string) (name, kind string, err error) {
	conn, err := grpc.NewClient("passthrough:///"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, "unix", path)
		}))
	if err != nil {
		return "", "", fmt.Errorf("RegisterPlugin error -- dial failed at socket %s, err: %v", path, err)
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	ictx, cancel := context.WithTimeout(ctx, getInfoTimeout)
	info, err := client.GetInfo(ictx, &registerapi.InfoRequest{})
	cancel()
	if err != nil {
		return "", "", fmt.Errorf("RegisterPlugin error -- failed to get plugin info using RPC GetInfo at socket %s, err: %v", path, err)
	}
	name, kind = info.Name, info.Type
	h := m.cfg.Handlers[kind]
	if h == nil {
		msg := fmt.Sprintf("RegisterPlugin error -- no handler registered for plugin type: %s at socket %s", kind, path)
		return name, kind, errors.Join(errors.New(msg), notify(ctx, client, false, msg))
	}
	endpoint := info.Endpoint
	if endpoint == "" {
		endpoint = path
	}
	if err := h.ValidatePlugin(name, endpoint, info.SupportedVersions); err != nil {
		msg := fmt.Sprintf("RegisterPlugin error -- plugin validation failed with err: %v", err)
		return name, kind, errors.Join(errors.New(msg), notify(ctx, client, false, msg))
	}
	if err := h.RegisterPlugin(ctx, name, endpoint, info.SupportedVersions); err != nil {
		msg := fmt.Sprintf("RegisterPlugin error -- plugin registration failed with err: %v", err)
		return name, kind, errors.Join(errors.New(msg), notify(ctx, client, false, msg))
	}
	if err := notify(ctx, client, true, ""); err != nil {
		h.DeRegisterPlugin(name, endpoint)
		return name, kind, fmt.Errorf("RegisterPlugin error -- failed to send registration status at socket %s, err: %v", path, err)
	}
	return name, kind, nil
}

func notify(ctx context.Context, client registerapi.RegistrationClient, registered bool, msg string) error {
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	_, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: registered, Error: msg})
	return err
}
