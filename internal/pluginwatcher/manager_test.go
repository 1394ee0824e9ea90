package pluginwatcher

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/ctortest"
)

// fakePlugin serves the Registration service on a unix socket, as a CSI
// driver's registrar does, and records the statuses it is told.
type fakePlugin struct {
	registerapi.UnimplementedRegistrationServer
	info     *registerapi.PluginInfo
	mu       sync.Mutex
	infos    int
	statuses []*registerapi.RegistrationStatus
	srv      *grpc.Server
}

func (p *fakePlugin) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.infos++
	return p.info, nil
}

func (p *fakePlugin) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.statuses = append(p.statuses, s)
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (p *fakePlugin) last(t *testing.T) (*registerapi.RegistrationStatus, int) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.statuses) == 0 {
		t.Fatal("the plugin was told nothing")
	}
	return p.statuses[len(p.statuses)-1], p.infos
}

func servePlugin(t *testing.T, path string, info *registerapi.PluginInfo) *fakePlugin {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := &fakePlugin{info: info, srv: grpc.NewServer()}
	registerapi.RegisterRegistrationServer(p.srv, p)
	go func() { _ = p.srv.Serve(l) }()
	t.Cleanup(p.srv.Stop)
	return p
}

type call struct{ op, name, endpoint string }

type fakeHandler struct {
	mu          sync.Mutex
	calls       []call
	validateErr error
}

func (h *fakeHandler) record(op, name, endpoint string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, call{op, name, endpoint})
}

func (h *fakeHandler) ValidatePlugin(name, endpoint string, versions []string) error {
	h.record("validate", name, endpoint)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.validateErr
}

func (h *fakeHandler) RegisterPlugin(_ context.Context, name, endpoint string, _ []string) error {
	h.record("register", name, endpoint)
	return nil
}

func (h *fakeHandler) DeRegisterPlugin(name, endpoint string) { h.record("deregister", name, endpoint) }

func (h *fakeHandler) ops() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, c := range h.calls {
		out = append(out, c.op+" "+c.name)
	}
	return out
}

func TestNew(t *testing.T) {
	h := map[string]Handler{registerapi.CSIPlugin: &fakeHandler{}}
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no dir", Config: Config{Handlers: h}, WantErr: "Config.Dir"},
		{Name: "no handlers", Config: Config{Dir: "/x"}, WantErr: "Config.Handlers"},
		{Name: "valid", Config: Config{Dir: "/x", Handlers: h}},
	}, func(t *testing.T, m *Manager) {
		ctortest.RealClock(t, m.cfg.Clock)
		if m.cfg.Period != time.Second {
			t.Errorf("period %v", m.cfg.Period)
		}
	})
}

func TestRegistration(t *testing.T) {
	// A short folder: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "preg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	clk := testclock.NewFakeClock(time.Unix(1000, 0))
	csi := &fakeHandler{validateErr: errors.New("no supported version")}
	m, err := New(Config{Dir: dir, Handlers: map[string]Handler{registerapi.CSIPlugin: csi}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sock := filepath.Join(dir, "csi.example.com-reg.sock")
	p := servePlugin(t, sock, &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "csi.example.com",
		Endpoint: "/var/lib/kubelet/plugins/csi.example.com/csi.sock", SupportedVersions: []string{"1.0.0"}})
	// A dot-file and a plugin of a type without a handler.
	if err := os.WriteFile(filepath.Join(dir, ".hidden.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dp := servePlugin(t, filepath.Join(dir, "dp.sock"), &registerapi.PluginInfo{Type: registerapi.DevicePlugin, Name: "gpu"})

	m.reconcile(ctx)
	st, infos := p.last(t)
	if st.PluginRegistered || st.Error != "RegisterPlugin error -- plugin validation failed with err: no supported version" || infos != 1 {
		t.Errorf("after a failed validation the plugin was told %+v (%d GetInfo)", st, infos)
	}
	if st, _ := dp.last(t); st.PluginRegistered || !strings.Contains(st.Error, "no handler registered for plugin type: DevicePlugin") {
		t.Errorf("the device plugin was told %+v", st)
	}
	// Not retried before its back-off...
	m.reconcile(ctx)
	if _, infos := p.last(t); infos != 1 {
		t.Errorf("retried at once (%d GetInfo)", infos)
	}
	// ...then retried, and registered once the handler accepts it.
	csi.mu.Lock()
	csi.validateErr = nil
	csi.mu.Unlock()
	clk.Step(BackoffInitial)
	m.reconcile(ctx)
	if st, infos := p.last(t); !st.PluginRegistered || st.Error != "" || infos != 2 {
		t.Errorf("after the retry the plugin was told %+v (%d GetInfo)", st, infos)
	}
	if got := m.Registered(); got[sock] != "csi.example.com" || len(got) != 1 {
		t.Errorf("registered %v", got)
	}
	csi.mu.Lock()
	endpoint := csi.calls[len(csi.calls)-1].endpoint
	csi.mu.Unlock()
	if endpoint != "/var/lib/kubelet/plugins/csi.example.com/csi.sock" {
		t.Errorf("registered with endpoint %q, want the plugin's", endpoint)
	}
	// Registered and still there: left alone.
	m.reconcile(ctx)
	if _, infos := p.last(t); infos != 2 {
		t.Errorf("a registered plugin asked again (%d GetInfo)", infos)
	}
	// Its socket goes: deregistered.
	p.srv.Stop()
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	m.reconcile(ctx)
	want := "validate csi.example.com,validate csi.example.com,register csi.example.com,deregister csi.example.com"
	if got := strings.Join(csi.ops(), ","); got != want {
		t.Errorf("handler calls %s, want %s", got, want)
	}
	if len(m.Registered()) != 0 {
		t.Errorf("still registered: %v", m.Registered())
	}
}
