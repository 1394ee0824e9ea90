package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

const (
	hostpathDriver   = "hostpath.csi.nodelet.dev"
	hostpathTopology = "topology.hostpath.csi.nodelet.dev/node"
)

// csiDriver is test/fakes/hostpathcsi running for a node, registering
// itself in the node's plugins_registry.
type csiDriver struct {
	cmd      *exec.Cmd
	logFile  string
	endpoint string
	stateDir string
	done     chan struct{}
}

func startCSIDriver(t *testing.T, n *framework.Nodelet, extra ...string) *csiDriver {
	t.Helper()
	bin, err := framework.BuildTool("./test/fakes/hostpathcsi")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// What a failed test left: its mounts and loop devices.
		framework.UnmountUnder(dir, t.Logf)
		if imgs, _ := filepath.Glob(filepath.Join(dir, "state", "volumes", "*.img")); len(imgs) > 0 {
			for _, img := range imgs {
				out, _ := exec.Command("losetup", "-j", img).Output()
				for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
					if dev, _, ok := strings.Cut(line, ":"); ok {
						_ = exec.Command("losetup", "-d", dev).Run()
					}
				}
			}
		}
		os.RemoveAll(dir)
	})
	d := &csiDriver{logFile: filepath.Join(dir, "driver.log"), done: make(chan struct{})}
	f, err := os.Create(d.logFile)
	if err != nil {
		t.Fatal(err)
	}
	d.endpoint, d.stateDir = filepath.Join(dir, "csi.sock"), filepath.Join(dir, "state")
	args := append([]string{"-endpoint", d.endpoint, "-node-id", n.NodeName, "-state-dir", d.stateDir,
		"-registry-dir", filepath.Join(n.RootDir, "plugins_registry"), "-max-volumes", "7"}, extra...)
	d.cmd = exec.Command(bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = f, f
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.cmd.Wait(); f.Close(); close(d.done) }()
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			b, _ := os.ReadFile(d.logFile)
			t.Logf("driver log:\n%s", b)
		}
	})
	return d
}

func (d *csiDriver) stop() {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done
}

func (d *csiDriver) log() string {
	b, _ := os.ReadFile(d.logFile)
	return string(b)
}

// csiNodeDriver is the driver's entry in the node's CSINode (nil: none).
func csiNodeDriver(t *testing.T, c *framework.Cluster, node, driver string) (*storagev1.CSINode, *storagev1.CSINodeDriver) {
	t.Helper()
	cn, err := c.Client.StorageV1().CSINodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		return nil, nil
	}
	for i := range cn.Spec.Drivers {
		if cn.Spec.Drivers[i].Name == driver {
			return cn, &cn.Spec.Drivers[i]
		}
	}
	return cn, nil
}

// TestCSIDriverRegistration: the node's CSINode exists (owned by the Node,
// the migrated-plugins annotation) before any driver; the project's
// host-path driver registers itself through <root-dir>/plugins_registry
// and within seconds the CSINode lists it (node ID, topology key, attach
// limit), the Node has the nodeid annotation and the topology label, and
// the driver was told it is registered. Its socket gone, it is taken out;
// after a nodelet restart it is registered again; a driver whose
// NodeGetInfo fails at first is registered once it answers.
func TestCSIDriverRegistration(t *testing.T) {
	name := "e2e-csi-reg"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	startNode(t, c, n)
	ctx := context.Background()
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		cn, _ := csiNodeDriver(t, c, name, hostpathDriver)
		return cn != nil
	}, "the node's CSINode created")
	cn, _ := csiNodeDriver(t, c, name, hostpathDriver)
	if len(cn.OwnerReferences) != 1 || cn.OwnerReferences[0].Kind != "Node" || !strings.Contains(cn.Annotations["storage.alpha.kubernetes.io/migrated-plugins"], "kubernetes.io/gce-pd") {
		t.Errorf("CSINode %+v", cn.ObjectMeta)
	}

	start := time.Now()
	d := startCSIDriver(t, n)
	framework.Eventually(t, 20*time.Second, 100*time.Millisecond, func() bool {
		_, drv := csiNodeDriver(t, c, name, hostpathDriver)
		return drv != nil
	}, "the driver in the CSINode")
	t.Logf("driver started -> in the CSINode: %v", time.Since(start).Round(10*time.Millisecond))
	_, drv := csiNodeDriver(t, c, name, hostpathDriver)
	if drv.NodeID != name || len(drv.TopologyKeys) != 1 || drv.TopologyKeys[0] != hostpathTopology || drv.Allocatable == nil || *drv.Allocatable.Count != 7 {
		t.Errorf("CSINode driver %+v", drv)
	}
	node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Annotations["csi.volume.kubernetes.io/nodeid"]; got != `{"`+hostpathDriver+`":"`+name+`"}` || node.Labels[hostpathTopology] != name {
		t.Errorf("node annotation %q, label %q", got, node.Labels[hostpathTopology])
	}
	framework.Eventually(t, 10*time.Second, 100*time.Millisecond, func() bool {
		return strings.Contains(d.log(), `registration status: registered=true error=""`)
	}, "the driver told it is registered")

	// The driver goes (its sockets with it): out of the CSINode and the Node.
	d.stop()
	framework.Eventually(t, 20*time.Second, 200*time.Millisecond, func() bool {
		_, drv := csiNodeDriver(t, c, name, hostpathDriver)
		node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return drv == nil && err == nil && node.Annotations["csi.volume.kubernetes.io/nodeid"] == ""
	}, "the driver deregistered")

	// NodeGetInfo failing twice: registered on a retry.
	d = startCSIDriver(t, n, "-fail-node-get-info", "2")
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		_, drv := csiNodeDriver(t, c, name, hostpathDriver)
		return drv != nil
	}, "the driver registered after its NodeGetInfo failed twice")
	if got := strings.Count(d.log(), "registered=false"); got != 2 {
		t.Errorf("the driver was told %d failures, want 2:\n%s", got, d.log())
	}

	// nodelet restarted: the driver registered again.
	n.Stop()
	n.Start()
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		return strings.Count(d.log(), "registered=true") == 2
	}, "the driver registered again after nodelet's restart")
	if _, drv := csiNodeDriver(t, c, name, hostpathDriver); drv == nil {
		t.Error("not in the CSINode after the restart")
	}
}
