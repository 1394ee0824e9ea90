package nodelet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/nodelet/nodelet/internal/config"
	"github.com/nodelet/nodelet/internal/ctortest"
	"github.com/nodelet/nodelet/internal/lifecycle"
	"github.com/nodelet/nodelet/internal/machine"
	"github.com/prometheus/client_golang/prometheus"
)

// standalone is a standalone nodelet's configuration in a temporary root:
// a static pod directory, no cgroups per QoS, a fake cgroup v2 mount, no
// server, failSwapOn false (the host's swap is not the test's); extra are
// more flags.
func standalone(t *testing.T, healthzPort int, extra ...string) (Config, string) {
	t.Helper()
	dir := t.TempDir()
	manifests, cgroupMount := filepath.Join(dir, "manifests"), filepath.Join(dir, "cgroup")
	for _, d := range []string{manifests, filepath.Join(cgroupMount, "kubepods")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(cgroupMount, "cgroup.controllers"), filepath.Join(cgroupMount, "kubepods", "memory.events")} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfgFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
healthzBindAddress: 127.0.0.1
healthzPort: %d
podLogsDir: %s
featureGates:
  EventedPLEG: false
`, healthzPort, filepath.Join(dir, "logs"))), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--config", cfgFile, "--root-dir", filepath.Join(dir, "root"), "--pod-manifest-path", manifests,
		"--hostname-override", "node1", "--enable-server=false", "--local-api=false", "--file-check-frequency=100ms"}, extra...)
	opts, err := config.Parse(context.Background(), args)
	if err != nil {
		t.Fatal(err)
	}
	return Config{Options: opts, Runtime: critest.NewFakeRuntimeService(), Images: critest.NewFakeImageService(),
		Machine: machine.Config{CgroupMount: cgroupMount}, Registerer: prometheus.NewRegistry()}, manifests
}

func TestNew(t *testing.T) {
	cfg, _ := standalone(t, 0)
	ctortest.Run(t, func(c Config) (*Nodelet, error) { return New(context.Background(), c) }, []ctortest.Case[Config]{
		{Name: "no options", Config: Config{}, WantErr: "Config.Options is required"},
		{Name: "standalone", Config: cfg},
	}, func(t *testing.T, n *Nodelet) {
		ctortest.RealClock(t, n.clock)
		if n.client != nil || n.certs != nil {
			t.Error("API clients without a kubeconfig")
		}
	})
}

// The whole composition over a fake CRI runtime: a static pod written to
// the manifest directory gets its sandbox and container; Run returns when
// its context ends, and the loops are stopped.
func TestRunStandalone(t *testing.T) {
	cfg, manifests := standalone(t, 0)
	rt := cfg.Runtime.(*critest.FakeRuntimeService)
	n, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- n.Run(ctx) }()
	if err := os.WriteFile(filepath.Join(manifests, "web.yaml"), []byte(`apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers: [{name: app, image: busybox}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, rt, "app", done)
	if p, ok := n.pods.GetByName("default", "web-node1"); !ok || p.Spec.NodeName != "node1" {
		t.Errorf("static pod in the pod manager: %v %v", p, ok)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if err := n.loops.Start(context.Background()); err == nil {
		t.Error("the loops were not stopped")
	}
}

// waitRunning waits, 30 s at most, until the runtime runs a container
// named name: a bounded wait for a positive outcome (nodelet runs here with
// its real file watcher and sockets, which a synctest bubble does not
// allow). Run returning meanwhile (its result on done) fails the test.
func waitRunning(t *testing.T, rt *critest.FakeRuntimeService, name string, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("Run returned early: %v", err)
		default:
			return running(rt, name), nil
		}
	})
	if err != nil {
		t.Fatalf("the static pod's container %s is not running: %v; runtime calls: %v", name, err, rt.GetCalls())
	}
}

func running(rt *critest.FakeRuntimeService, name string) bool {
	rt.Lock()
	defer rt.Unlock()
	for _, c := range rt.Containers {
		if c.Metadata.Name == name && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return true
		}
	}
	return false
}

// A fatal loop's failure stops nodelet with a message naming the loop: the
// health endpoint's port is taken.
func TestFatalLoopStopsNodelet(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg, _ := standalone(t, l.Addr().(*net.TCPAddr).Port)
	n, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- n.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.HasPrefix(err.Error(), "healthz: ") || !strings.Contains(err.Error(), "address already in use") {
			t.Errorf("Run: %v, want the healthz loop's failure", err)
		}
		if errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v, a cancellation", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("nodelet went on without its health endpoint")
	}
}

// A fatal loop failing while pods run ends Run too: the pod workers are
// stopped, not waited for forever.
func TestFatalLoopWithPodsRunning(t *testing.T) {
	cfg, manifests := standalone(t, 0)
	rt := cfg.Runtime.(*critest.FakeRuntimeService)
	if err := os.WriteFile(filepath.Join(manifests, "web.yaml"), []byte(`apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers: [{name: app, image: busybox}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- n.Run(context.Background()) }()
	waitRunning(t, rt, "app", done)
	if err := n.loops.Start(context.Background(), lifecycle.Loop{Name: "broken", Fatal: true,
		Run: func(context.Context) error { return errors.New("boom") }}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || err.Error() != "broken: boom" {
			t.Errorf("Run: %v, want the broken loop's failure", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after a fatal loop failed with a pod running")
	}
}

// Before the runtime answers, healthz says so (and nothing else fails):
// the components that need the runtime do not exist yet.
func TestHealthzBeforeTheRuntime(t *testing.T) {
	cfg, _ := standalone(t, 0)
	n, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	n.healthHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz?verbose", nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "not connected to the container runtime") {
		t.Errorf("healthz before the runtime: %d %s", rec.Code, rec.Body.String())
	}
}
