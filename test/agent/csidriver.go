package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// CSIDriver is the project's host-path CSI driver (test/fakes/hostpathcsi)
// running for a bench's agent, registering itself in the agent's
// plugins_registry, its volumes and log in Dir.
type CSIDriver struct {
	Dir      string
	Endpoint string
	cmd      *exec.Cmd
	done     chan struct{}
}

// StartCSIDriver starts the driver binary bin for node, registering in
// registry, with extra flags.
func StartCSIDriver(bin, registry, node string, extra ...string) (*CSIDriver, error) {
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, "driver.log"))
	if err != nil {
		return nil, err
	}
	d := &CSIDriver{Dir: dir, Endpoint: filepath.Join(dir, "csi.sock"), done: make(chan struct{})}
	d.cmd = exec.Command(bin, append([]string{"-endpoint", d.Endpoint, "-node-id", node, "-registry-dir", registry,
		"-state-dir", filepath.Join(dir, "state")}, extra...)...)
	d.cmd.Stdout, d.cmd.Stderr = f, f
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = d.cmd.Wait(); f.Close(); close(d.done) }()
	return d, nil
}

// Stop stops the driver (its sockets go with it), removes what it left and
// returns when it exited.
func (d *CSIDriver) Stop() time.Time {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done
	at := time.Now()
	framework.UnmountUnder(d.Dir, func(string, ...any) {})
	_ = os.RemoveAll(d.Dir)
	return at
}

// InCSINode reports whether the node's CSINode lists driver.
func InCSINode(c kubernetes.Interface, node, driver string) bool {
	cn, err := c.StorageV1().CSINodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, d := range cn.Spec.Drivers {
		if d.Name == driver {
			return true
		}
	}
	return false
}
