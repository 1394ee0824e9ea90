package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
)

// StartContainerd2 starts a private containerd v2 (built by stack-up from
// the Go module proxy: CONTAINERD2_BIN) for one test, sharing the stack's
// CNI network and registries, and returns a copy of the stack whose runtime
// it is, CDI enabled with specs read from Stack.CDISpecDir. It is stopped,
// its shims killed and its mounts removed when the test ends (after the
// nodelets the test made on it).
func StartContainerd2(t testing.TB, s *Stack) *Stack {
	t.Helper()
	bin := s.Env["CONTAINERD2_BIN"]
	if bin == "" {
		if InCI() {
			t.Fatal(".stack/env lacks CONTAINERD2_BIN: run hack/stack-up.sh")
		}
		t.Skip("containerd v2 is not built (run make stack-up)")
	}
	runc := s.Env["RUNC"]
	if runc == "" || s.Env["STACK_RUNTIME"] != "containerd2" {
		runc = "/usr/sbin/runc"
	}
	return startContainerd(t, s, "containerd v2", filepath.Join(bin, "containerd"), func(dir, sock string) string {
		return fmt.Sprintf(`version = 3
root = "%[1]s/root"
state = "%[1]s/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing", "io.containerd.nri.v1.nri"]

[grpc]
  address = "%[2]s"

[ttrpc]
  address = "%[2]s.ttrpc"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "%[3]s"
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = "%[4]s/certs.d"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  enable_selinux = false
  tolerate_missing_hugetlb_controller = true
  enable_cdi = true
  cdi_spec_dirs = ["%[1]s/cdi"]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "%[5]s"
        Root = "%[1]s/runc"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "%[4]s/cni/net.d"
    max_conf_num = 1

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, dir, sock, s.Env["PAUSE_IMAGE"], s.Env["STACK_DIR"], runc)
	})
}

// StartContainerd1 starts a private containerd 1.6 (Debian's, the stack's
// second configuration: STACK_RUNTIME=containerd1) for one test, as
// StartContainerd2 does; no CDI.
func StartContainerd1(t testing.TB, s *Stack) *Stack {
	t.Helper()
	if _, err := os.Stat("/usr/bin/containerd"); err != nil {
		t.Fatalf("Debian's containerd 1.6 is not installed (make stack-up installs it): %v", err)
	}
	c := startContainerd(t, s, "containerd 1.6", "/usr/bin/containerd", func(dir, sock string) string {
		return fmt.Sprintf(`version = 2
root = "%[1]s/root"
state = "%[1]s/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "%[2]s"

[ttrpc]
  address = "%[2]s.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[3]s"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  tolerate_missing_hugetlb_controller = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "%[1]s/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "%[4]s/cni/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "%[4]s/certs.d"
`, dir, sock, s.Env["PAUSE_IMAGE"], s.Env["STACK_DIR"])
	})
	c.CDISpecDir = ""
	return c
}

// startContainerd runs bin with the configuration config(dir, socket) in a
// fresh directory until the test ends, and returns a copy of s on it with
// the busybox and pause images pulled.
func startContainerd(t testing.TB, s *Stack, name, bin string, config func(dir, sock string) string) *Stack {
	t.Helper()
	// A short path: the socket's must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "ctrd-")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "containerd.sock")
	cfg := config(dir, sock)
	writeFile(t, filepath.Join(dir, "config.toml"), cfg)
	if err := os.MkdirAll(filepath.Join(dir, "cdi"), 0o755); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", filepath.Join(dir, "config.toml"))
	// Its own runc shim (containerd v2's is beside it).
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		killShimsOf(sock)
		UnmountUnder(dir, t.Logf)
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "containerd.log")); err == nil {
				t.Logf("%s log (tail):\n%s", name, tail(string(b), 4000))
			}
		}
		_ = os.RemoveAll(dir)
	})

	c := *s
	c.RuntimeEndpoint = "unix://" + sock
	c.CDISpecDir = filepath.Join(dir, "cdi")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	Eventually(t, 20*time.Second, 100*time.Millisecond, func() bool {
		select {
		case <-exited:
			b, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			t.Fatalf("%s exited:\n%s", name, tail(string(b), 4000))
		default:
		}
		_, err := os.Stat(sock)
		return err == nil
	}, "%s listening on %s", name, sock)
	c.Runtime, err = remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(c.RuntimeEndpoint).
		WithConnectionTimeout(5 * time.Second).WithTracerProvider(nil).Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Images, err = remote.NewRemoteImageServiceBuilder().WithEndpoint(c.RuntimeEndpoint).
		WithConnectionTimeout(5 * time.Second).WithTracerProvider(nil).Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Runtime.Version(ctx, "v1")
	if err != nil {
		t.Fatalf("%s's CRI: %v", name, err)
	}
	t.Logf("started %s %s on %s", v.RuntimeName, v.RuntimeVersion, sock)
	for _, img := range []string{s.Env["BUSYBOX_IMAGE"], s.Env["PAUSE_IMAGE"]} {
		if _, err := c.Images.PullImage(ctx, &runtimeapi.ImageSpec{Image: img}, nil, nil); err != nil {
			t.Fatalf("%s pulling %s: %v", name, img, err)
		}
	}
	return &c
}

// killShimsOf kills the shims of the containerd listening on sock (their
// command line names it) and the processes of their containers.
func killShimsOf(sock string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmdline := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmdline, "containerd-shim") && strings.Contains(cmdline, sock) {
			var pid int
			if _, err := fmt.Sscan(e.Name(), &pid); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
