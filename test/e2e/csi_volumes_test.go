package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// ensureCSIDriver creates (or replaces) the host-path driver's CSIDriver
// object with spec, removed when the test ends.
func ensureCSIDriver(t *testing.T, c *framework.Cluster, spec storagev1.CSIDriverSpec) {
	t.Helper()
	ctx := context.Background()
	api := c.Client.StorageV1().CSIDrivers()
	if err := api.Delete(ctx, hostpathDriver, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	framework.Eventually(t, 10*time.Second, 100*time.Millisecond, func() bool {
		_, err := api.Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: hostpathDriver}, Spec: spec}, metav1.CreateOptions{})
		return err == nil
	}, "CSIDriver created")
	t.Cleanup(func() { _ = api.Delete(context.Background(), hostpathDriver, metav1.DeleteOptions{}) })
}

// createCSIVolume asks the driver's controller service for a volume.
func (d *csiDriver) createVolume(t *testing.T, name string, size int64, params map[string]string) *csipb.Volume {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+d.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := csipb.NewControllerClient(conn).CreateVolume(ctx, &csipb.CreateVolumeRequest{
		Name: name, CapacityRange: &csipb.CapacityRange{RequiredBytes: size}, Parameters: params,
		VolumeCapabilities: []*csipb.VolumeCapability{{
			AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{}},
			AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetVolume()
}

// staticPV creates a PV for the driver's volume, pre-bound to a PVC of the
// same name in ns, and the PVC; it waits for the PVC to be Bound.
func staticPV(t *testing.T, c *framework.Cluster, ns, name string, vol *csipb.Volume) {
	t.Helper()
	ctx := context.Background()
	size := resource.NewQuantity(vol.GetCapacityBytes(), resource.BinarySI)
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Spec: v1.PersistentVolumeSpec{
		Capacity:    v1.ResourceList{v1.ResourceStorage: *size},
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
		ClaimRef:         &v1.ObjectReference{Namespace: ns, Name: name},
		StorageClassName: "",
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
			Driver: hostpathDriver, VolumeHandle: vol.GetVolumeId(), FSType: "ext4", VolumeAttributes: vol.GetVolumeContext()}},
	}}
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeClaimSpec{
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, VolumeName: pv.Name, StorageClassName: ptr.To(""),
		Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: *size}},
	}}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		got, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == v1.ClaimBound
	}, "PVC %s/%s bound", ns, name)
}

// csiCall is one call of the driver's log.
type csiCall struct {
	method string
	req    string
}

var callLine = regexp.MustCompile(`call /csi\.v1\.(?:Node|Controller)/(\w+) request (.*) -> error (.*)$`)

// calls lists the driver's successful calls of the given methods, in order.
func (d *csiDriver) calls(methods ...string) []csiCall {
	var out []csiCall
	for _, line := range strings.Split(d.log(), "\n") {
		m := callLine.FindStringSubmatch(line)
		if m == nil || m[3] != "<nil>" {
			continue
		}
		for _, want := range methods {
			if m[1] == want {
				// prototext spaces its fields unstably on purpose.
				out = append(out, csiCall{m[1], strings.Join(strings.Fields(m[2]), " ")})
			}
		}
	}
	return out
}

// of keeps the calls about one volume.
func of(handle string, cs []csiCall) []csiCall {
	var out []csiCall
	for _, c := range cs {
		if strings.Contains(c.req, `volume_id:"`+handle+`"`) {
			out = append(out, c)
		}
	}
	return out
}

func callNames(cs []csiCall) string {
	var names []string
	for _, c := range cs {
		names = append(names, c.method)
	}
	return strings.Join(names, ",")
}

func deletePodNow(t *testing.T, c *framework.Cluster, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, "pod %s/%s gone", ns, name)
}

func pvcPod(name, node, claim, script string) *v1.Pod {
	p := busyboxPod(name, node, script)
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return p
}

// TestCSIPersistentVolume mirrors upstream's csimock "CSI workload
// information" and kubelet-restart cases with the project's host-path
// driver (ext4 images on loop devices): a PVC bound to a CSI PV is staged
// once at upstream's globalmount path and published at the pod's
// kubernetes.io~csi/<pv>/mount with vol_data.json and the pod's
// information (podInfoOnMount), reported in volumesInUse, and the pod
// writes to it; deleted, the pod's volume is unpublished, then unstaged;
// a second pod reads the data back. nodelet restarted under the running
// pod: nothing is staged or published again, and the pod deleted after the
// restart gets its unpublish and unstage.
func TestCSIPersistentVolume(t *testing.T) {
	name := "e2e-csi-pv"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	startNode(t, c, n)
	d := startCSIDriver(t, n)
	ensureCSIDriver(t, c, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true),
		FSGroupPolicy:        ptr.To(storagev1.FileFSGroupPolicy),
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}})
	framework.Eventually(t, 20*time.Second, 100*time.Millisecond, func() bool {
		_, drv := csiNodeDriver(t, c, name, hostpathDriver)
		return drv != nil
	}, "the driver registered")
	ns := c.Namespace(t, "csi-pv")
	vol := d.createVolume(t, ns+"-data", 16<<20, map[string]string{"type": "image"})
	staticPV(t, c, ns, "data", vol)
	pvName := ns + "-data"
	handle := vol.GetVolumeId()

	start := time.Now()
	createPods(t, c, ns, pvcPod("csi-writer", name, "data", "echo hello > /data/f && sync && sleep 3600"))
	writer := waitPod(t, c, ns, "csi-writer", 90*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	t.Logf("pod with a CSI PVC Running %v after its creation", time.Since(start).Round(10*time.Millisecond))

	staging := filepath.Join(n.RootDir, "plugins", "kubernetes.io", "csi", hostpathDriver, fmt.Sprintf("%x", sha256.Sum256([]byte(handle))), "globalmount")
	target := filepath.Join(n.RootDir, "pods", string(writer.UID), "volumes", "kubernetes.io~csi", pvName, "mount")
	calls := d.calls("NodeStageVolume", "NodePublishVolume")
	if callNames(calls) != "NodeStageVolume,NodePublishVolume" {
		t.Fatalf("driver calls %s, want NodeStageVolume,NodePublishVolume:\n%s", callNames(calls), d.log())
	}
	if !strings.Contains(calls[0].req, `staging_target_path:"`+staging+`"`) {
		t.Errorf("NodeStageVolume %s, want staging path %s", calls[0].req, staging)
	}
	for _, want := range []string{`target_path:"` + target + `"`, `staging_target_path:"` + staging + `"`,
		`key:"csi.storage.k8s.io/pod.name" value:"csi-writer"`, `key:"csi.storage.k8s.io/pod.uid" value:"` + string(writer.UID) + `"`,
		`key:"csi.storage.k8s.io/ephemeral" value:"false"`, `fs_type:"ext4"`, `SINGLE_NODE_WRITER`} {
		if !strings.Contains(calls[1].req, want) {
			t.Errorf("NodePublishVolume %s lacks %s", calls[1].req, want)
		}
	}
	volData, err := os.ReadFile(filepath.Join(filepath.Dir(target), "vol_data.json"))
	if err != nil || !strings.Contains(string(volData), `"volumeHandle":"`+handle+`"`) || !strings.Contains(string(volData), `"specVolID":"`+pvName+`"`) ||
		!strings.Contains(string(volData), `"volumeLifecycleMode":"Persistent"`) || !strings.Contains(string(volData), `"nodeName":"`+name+`"`) {
		t.Errorf("vol_data.json %s %v", volData, err)
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(staging), "vol_data.json")); err != nil || !strings.Contains(string(b), `"driverName":"`+hostpathDriver+`"`) {
		t.Errorf("staging vol_data.json %s %v", b, err)
	}
	exec := volExec(t, c, "csi-writer", "c")
	if got := volMust(t, exec, "cat /data/f; grep ' /data ' /proc/mounts | cut -d' ' -f3"); got != "hello\next4" {
		t.Errorf("in the pod: %q, want hello and an ext4 mount", got)
	}
	unique := v1.UniqueVolumeName("kubernetes.io/csi/" + hostpathDriver + "^" + handle)
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		node, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && len(node.Status.VolumesInUse) == 1 && node.Status.VolumesInUse[0] == unique
	}, "volumesInUse reports %s", unique)

	deletePodNow(t, c, ns, "csi-writer")
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		return callNames(d.calls("NodeStageVolume", "NodePublishVolume", "NodeUnpublishVolume", "NodeUnstageVolume")) ==
			"NodeStageVolume,NodePublishVolume,NodeUnpublishVolume,NodeUnstageVolume"
	}, "unpublished, then unstaged")
	if un := d.calls("NodeUnpublishVolume", "NodeUnstageVolume"); !strings.Contains(un[0].req, `target_path:"`+target+`"`) ||
		!strings.Contains(un[1].req, `staging_target_path:"`+staging+`"`) {
		t.Errorf("teardown calls %+v", un)
	}
	if _, err := os.Stat(filepath.Dir(staging)); !os.IsNotExist(err) {
		t.Errorf("staging directory left: %v", err)
	}
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		node, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && len(node.Status.VolumesInUse) == 0
	}, "volumesInUse empty again")

	// The data is there for the next pod.
	createPods(t, c, ns, pvcPod("csi-reader", name, "data", "sleep 3600"))
	waitPod(t, c, ns, "csi-reader", 90*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if got := volMust(t, volExec(t, c, "csi-reader", "c"), "cat /data/f"); got != "hello" {
		t.Errorf("the second pod reads %q", got)
	}

	// nodelet restarted under the running pod: nothing mounted twice.
	before := len(d.calls("NodeStageVolume", "NodePublishVolume"))
	n.Stop()
	n.Start()
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		return strings.Count(d.log(), "registered=true") == 2
	}, "the driver registered again after the restart")
	time.Sleep(3 * time.Second) // the pod's first sync after the restart
	if got := len(d.calls("NodeStageVolume", "NodePublishVolume")); got != before {
		t.Errorf("after the restart: %d stage/publish calls, %d before:\n%s", got, before, d.log())
	}
	if got := volMust(t, volExec(t, c, "csi-reader", "c"), "cat /data/f"); got != "hello" {
		t.Errorf("after the restart the pod reads %q", got)
	}
	deletePodNow(t, c, ns, "csi-reader")
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		return len(d.calls("NodeUnstageVolume")) == 2
	}, "the pod deleted after the restart unpublished and unstaged")

	// A pod deleted while nodelet is down (upstream #85476: no
	// NodeUnstageVolume then): killed nodelet, pod force-deleted, its
	// containers left running; started again, nodelet stops them and
	// unpublishes and unstages the volume from the directories alone.
	createPods(t, c, ns, pvcPod("csi-orphan", name, "data", "sleep 3600"))
	orphan := waitPod(t, c, ns, "csi-orphan", 90*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	n.Kill()
	if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), "csi-orphan", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	n.Start()
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		return len(d.calls("NodeUnstageVolume")) == 3
	}, "the pod deleted while nodelet was down unpublished and unstaged")
	un := d.calls("NodeUnpublishVolume")
	if last := un[len(un)-1]; !strings.Contains(last.req, string(orphan.UID)) {
		t.Errorf("last unpublish %s, not the orphan's", last.req)
	}
	// The directory goes once the unstage returned and the pod's mounts
	// are checked gone: moments after the driver saw the call.
	orphanDir := filepath.Join(n.RootDir, "pods", string(orphan.UID))
	framework.Eventually(t, 10*time.Second, 100*time.Millisecond, func() bool {
		_, err := os.Stat(orphanDir)
		return os.IsNotExist(err)
	}, "the orphan's directory removed")
}

// TestCSIInlineVolume: an inline ephemeral CSI volume is published (not
// staged) with csi.storage.k8s.io/ephemeral "true" and upstream's handle,
// used by the pod, and unpublished when the pod goes; a volume of a driver
// that is not registered gives FailedMount with upstream's message and the
// pod waits; registered later, the pod starts; a pod whose
// NodePublishVolume hangs waits without holding up another pod of the
// same driver.
func TestCSIInlineVolume(t *testing.T) {
	name := "e2e-csi-inline"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	startNode(t, c, n)
	ensureCSIDriver(t, c, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true),
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}})
	ns := c.Namespace(t, "csi-inline")
	p := busyboxPod("csi-inline", name, "echo ok > /scratch/f && cat /scratch/f && sleep 3600")
	p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{
		Driver: hostpathDriver, VolumeAttributes: map[string]string{"size": "8Mi"}}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	createPods(t, c, ns, p)

	// No driver yet: FailedMount, as upstream words it.
	want := "driver name " + hostpathDriver + " not found in the list of registered CSI drivers"
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		for _, e := range podEvents(t, c, ns, "csi-inline") {
			if e.Reason == "FailedMount" && strings.Contains(e.Message, want) {
				return true
			}
		}
		return false
	}, "FailedMount: %s", want)
	if got := c.Pod(t, ns, "csi-inline"); got.Status.Phase != v1.PodPending {
		t.Errorf("pod %s without its driver", got.Status.Phase)
	}

	d := startCSIDriver(t, n)
	pod := waitPod(t, c, ns, "csi-inline", 60*time.Second, "running once the driver registered", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	calls := d.calls("NodeStageVolume", "NodePublishVolume")
	if callNames(calls) != "NodePublishVolume" {
		t.Fatalf("driver calls %s, want NodePublishVolume only", callNames(calls))
	}
	handle := fmt.Sprintf("csi-%x", sha256.Sum256([]byte(string(pod.UID)+"scratch")))
	target := filepath.Join(n.RootDir, "pods", string(pod.UID), "volumes", "kubernetes.io~csi", "scratch", "mount")
	for _, want := range []string{`volume_id:"` + handle + `"`, `target_path:"` + target + `"`,
		`key:"csi.storage.k8s.io/ephemeral" value:"true"`, `key:"size" value:"8Mi"`} {
		if !strings.Contains(calls[0].req, want) {
			t.Errorf("NodePublishVolume %s lacks %s", calls[0].req, want)
		}
	}
	if got := volMust(t, volExec(t, c, "csi-inline", "c"), "cat /scratch/f"); got != "ok" {
		t.Errorf("in the pod: %q", got)
	}

	// A hung driver call holds only its own pod: a pod whose
	// NodePublishVolume never answers stays Pending while another pod of
	// the same driver starts.
	hung := busyboxPod("csi-hung", name, "sleep 3600")
	hung.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{
		Driver: hostpathDriver, VolumeAttributes: map[string]string{"hang": "true"}}}}}
	hung.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	createPods(t, c, ns, hung)
	framework.Eventually(t, 10*time.Second, 100*time.Millisecond, func() bool {
		return strings.Contains(d.log(), "hanging (volume attribute hang=true)")
	}, "the hung pod's NodePublishVolume sent")
	other := busyboxPod("csi-other", name, "sleep 3600")
	other.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: hostpathDriver}}}}
	other.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	start := time.Now()
	createPods(t, c, ns, other)
	waitPod(t, c, ns, "csi-other", 30*time.Second, "running beside a hung volume", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	t.Logf("a pod of the same driver Running %v after its creation while another pod's NodePublishVolume hangs", time.Since(start).Round(10*time.Millisecond))
	if got := c.Pod(t, ns, "csi-hung"); got.Status.Phase != v1.PodPending {
		t.Errorf("the hung pod is %s", got.Status.Phase)
	}
	// Deleted, the hung pod's sync is cut short and it goes (while the
	// driver is still there to unpublish what it may have done).
	deletePodNow(t, c, ns, "csi-hung")
	deletePodNow(t, c, ns, "csi-other")
	deletePodNow(t, c, ns, "csi-inline")
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		for _, un := range d.calls("NodeUnpublishVolume") {
			if strings.Contains(un.req, `target_path:"`+target+`"`) {
				return true
			}
		}
		return false
	}, "unpublished")
	if len(d.calls("NodeUnstageVolume")) != 0 {
		t.Error("an inline volume was unstaged")
	}
}

// TestCSIAttach mirrors upstream's csimock "CSI attach test using mock
// driver" with the real attach-detach controller and external-attacher: a
// driver with attachRequired waits for its VolumeAttachment (FailedMount
// meanwhile, the pod Pending); once the external-attacher has attached it
// (ControllerPublishVolume), the volume is staged with the attachment's
// publish context; the pod gone and the volume out of volumesInUse, the
// controller detaches it (ControllerUnpublishVolume, the VolumeAttachment
// deleted).
func TestCSIAttach(t *testing.T) {
	name := "e2e-csi-attach"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	startNode(t, c, n)
	d := startCSIDriver(t, n)
	ensureCSIDriver(t, c, storagev1.CSIDriverSpec{AttachRequired: ptr.To(true)})
	framework.Eventually(t, 20*time.Second, 100*time.Millisecond, func() bool {
		_, drv := csiNodeDriver(t, c, name, hostpathDriver)
		return drv != nil
	}, "the driver registered")
	ns := c.Namespace(t, "csi-attach")
	vol := d.createVolume(t, ns+"-data", 16<<20, map[string]string{"type": "dir"})
	staticPV(t, c, ns, "data", vol)
	ctx := context.Background()
	attachment := "csi-" + fmt.Sprintf("%x", sha256.Sum256([]byte(vol.GetVolumeId()+hostpathDriver+name)))

	createPods(t, c, ns, pvcPod("csi-attached", name, "data", "echo attached > /data/f && sleep 3600"))
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		for _, e := range podEvents(t, c, ns, "csi-attached") {
			if e.Reason == "FailedMount" && strings.Contains(e.Message, "is not attached to the node yet") {
				return true
			}
		}
		return false
	}, "FailedMount while the volume is not attached")
	va, err := c.Client.StorageV1().VolumeAttachments().Get(ctx, attachment, metav1.GetOptions{})
	if err != nil || va.Spec.NodeName != name || va.Spec.Attacher != hostpathDriver || va.Status.Attached {
		t.Fatalf("VolumeAttachment %s before the attacher runs: %+v %v", attachment, va, err)
	}
	if got := c.Pod(t, ns, "csi-attached"); got.Status.Phase != v1.PodPending {
		t.Errorf("pod %s before the attachment", got.Status.Phase)
	}

	start := time.Now()
	startSidecar(t, c, "CSI_ATTACHER", d, "--timeout=30s")
	waitPod(t, c, ns, "csi-attached", 90*time.Second, "running once attached", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	t.Logf("attacher started -> pod Running: %v", time.Since(start).Round(10*time.Millisecond))
	// The attacher may repeat its (idempotent) ControllerPublishVolume.
	if calls := of(vol.GetVolumeId(), d.calls("ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume")); calls[0].method != "ControllerPublishVolume" {
		t.Errorf("driver calls %s: not attached first", callNames(calls))
	}
	calls := d.calls("NodeStageVolume", "NodePublishVolume")
	if callNames(calls) != "NodeStageVolume,NodePublishVolume" {
		t.Fatalf("node calls %s", callNames(calls))
	}
	for _, call := range calls {
		if !strings.Contains(call.req, `publish_context:{key:"attachedTo" value:"`+name+`"}`) {
			t.Errorf("%s without the attachment's publish context: %s", call.method, call.req)
		}
	}

	deletePodNow(t, c, ns, "csi-attached")
	framework.Eventually(t, 120*time.Second, 500*time.Millisecond, func() bool {
		_, err := c.Client.StorageV1().VolumeAttachments().Get(ctx, attachment, metav1.GetOptions{})
		return apierrors.IsNotFound(err) && len(of(vol.GetVolumeId(), d.calls("ControllerUnpublishVolume"))) > 0
	}, "detached after the pod went (ControllerUnpublishVolume, VolumeAttachment deleted)")
	if got := callNames(of(vol.GetVolumeId(), d.calls("NodeUnpublishVolume", "NodeUnstageVolume", "ControllerUnpublishVolume"))); !strings.HasPrefix(got, "NodeUnpublishVolume,NodeUnstageVolume,ControllerUnpublishVolume") {
		t.Errorf("teardown order %s", got)
	}
}

// TestCSIFSGroupAndTokens mirrors upstream's csimock "CSI FSGroupPolicy"
// and "CSIServiceAccountToken" cases: with fsGroupPolicy File nodelet gives
// the volume the pod's fsGroup (a non-root container writes to it); the
// driver's tokenRequests put a token for its audience, bound to the pod, in
// the volume context; a driver with VOLUME_MOUNT_GROUP gets the fsGroup in
// the capability and applies it itself.
func TestCSIFSGroupAndTokens(t *testing.T) {
	name := "e2e-csi-fsgroup"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	startNode(t, c, n)
	// podInfoOnMount: the driver tells inline volumes by csi.storage.k8s.io/ephemeral.
	ensureCSIDriver(t, c, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false), FSGroupPolicy: ptr.To(storagev1.FileFSGroupPolicy),
		PodInfoOnMount:       ptr.To(true),
		TokenRequests:        []storagev1.TokenRequest{{Audience: "e2e-csi-audience", ExpirationSeconds: ptr.To[int64](3600)}},
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}})
	ns := c.Namespace(t, "csi-fsgroup")
	mk := func(pod string) *v1.Pod {
		p := busyboxPod(pod, name, "sleep 3600")
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](4321), RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000)}
		p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: hostpathDriver}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
		return p
	}
	check := func(d *csiDriver, pod string, mountGroup bool) {
		t.Helper()
		createPods(t, c, ns, mk(pod))
		waitPod(t, c, ns, pod, 60*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
		exec := volExec(t, c, pod, "c")
		if got := volMust(t, exec, "stat -c %g /scratch && touch /scratch/by-user && stat -c %u:%g /scratch/by-user"); got != "4321\n1000:4321" {
			t.Errorf("%s: volume group and a new file's owner %q, want 4321 and 1000:4321", pod, got)
		}
		calls := d.calls("NodePublishVolume")
		if len(calls) == 0 {
			t.Fatalf("%s: no NodePublishVolume", pod)
		}
		req := calls[len(calls)-1].req
		if !strings.Contains(req, `key:"csi.storage.k8s.io/serviceAccount.tokens"`) || !strings.Contains(req, `e2e-csi-audience`) {
			t.Errorf("%s: NodePublishVolume without the driver's token: %s", pod, req)
		}
		if got := strings.Contains(req, `volume_mount_group:"4321"`); got != mountGroup {
			t.Errorf("%s: volume_mount_group in NodePublishVolume %v, want %v: %s", pod, got, mountGroup, req)
		}
		deletePodNow(t, c, ns, pod)
	}
	d := startCSIDriver(t, n)
	check(d, "csi-fsgroup-kubelet", false)
	d.stop()
	d = startCSIDriver(t, n, "-volume-mount-group")
	check(d, "csi-fsgroup-driver", true)
}
