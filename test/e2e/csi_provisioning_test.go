package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// startSidecar runs a CSI sidecar (external-provisioner, -attacher, built
// by hack/csi/build.sh) against the driver, with the admin kubeconfig,
// until the test ends.
func startSidecar(t *testing.T, c *framework.Cluster, envName string, d *csiDriver, args ...string) {
	t.Helper()
	bin := c.Env[envName]
	if bin == "" {
		t.Fatalf("%s is not in .stack/env: run hack/cluster/up.sh", envName)
	}
	logFile := filepath.Join(filepath.Dir(d.endpoint), filepath.Base(bin)+".log")
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"--csi-address=" + d.endpoint, "--kubeconfig=" + c.Env["KUBECONFIG"],
		"--leader-election=false", "--v=3"}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			lines := strings.Split(string(b), "\n")
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			t.Logf("%s log (tail):\n%s", filepath.Base(bin), strings.Join(lines, "\n"))
		}
	})
}

// storageClass creates a StorageClass of the host-path driver, removed
// when the test ends.
// waitRegistered waits for the host-path driver in the node's CSINode:
// the external-provisioner takes its topology from there.
func waitRegistered(t *testing.T, c *framework.Cluster, node string) {
	t.Helper()
	framework.Eventually(t, 20*time.Second, 100*time.Millisecond, func() bool {
		_, drv := csiNodeDriver(t, c, node, hostpathDriver)
		return drv != nil
	}, "the driver registered")
}

func storageClass(t *testing.T, c *framework.Cluster, name string, params map[string]string) {
	t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: hostpathDriver, Parameters: params,
		ReclaimPolicy: ptr.To(v1.PersistentVolumeReclaimDelete), AllowVolumeExpansion: ptr.To(true),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate)}
	_ = c.Client.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	if _, err := c.Client.StorageV1().StorageClasses().Create(context.Background(), sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// TestCSIDynamicProvisioning mirrors upstream's storage "StatefulSet with
// a dynamically provisioned volume" and "generic ephemeral volume" cases
// with the real external-provisioner: a StatefulSet's PVC is provisioned
// by the host-path driver, its pod writes, is deleted and recreated by the
// controller with a new UID, and reads the data back; a pod's generic
// ephemeral volume gets its PVC from the controller manager, is provisioned
// and used, and goes with the pod (the driver's DeleteVolume).
func TestCSIDynamicProvisioning(t *testing.T) {
	name := "e2e-csi-prov"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	// Volume stats measured again after 2 s (1 minute by default).
	n.AppendConfig("volumeStatsAggPeriod: 2s\n")
	startNode(t, c, n)
	d := startCSIDriver(t, n)
	waitRegistered(t, c, name)
	ensureCSIDriver(t, c, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false), FSGroupPolicy: ptr.To(storagev1.FileFSGroupPolicy)})
	startSidecar(t, c, "CSI_PROVISIONER", d, "--extra-create-metadata", "--timeout=30s")
	storageClass(t, c, "e2e-hostpath", map[string]string{"type": "image"})
	ns := c.Namespace(t, "csi-prov")
	ctx := context.Background()

	labels := map[string]string{"app": "csi-web"}
	script := `[ -f /data/written ] || { echo hello > /data/f && touch /data/written; }; sleep 3600`
	tmpl := busyboxPod("", name, script)
	tmpl.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	tmpl.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	ss := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "csi-web"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl.Spec},
		VolumeClaimTemplates: []v1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: v1.PersistentVolumeClaimSpec{
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: ptr.To("e2e-hostpath"),
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("16Mi")}}}}},
	}}
	start := time.Now()
	if _, err := c.Client.AppsV1().StatefulSets(ns).Create(ctx, ss, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := waitPod(t, c, ns, "csi-web-0", 120*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	t.Logf("StatefulSet created -> pod with a provisioned volume Running: %v", time.Since(start).Round(10*time.Millisecond))
	pvc, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-csi-web-0", metav1.GetOptions{})
	if err != nil || pvc.Status.Phase != v1.ClaimBound {
		t.Fatalf("PVC %v %v", pvc, err)
	}
	pv, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != hostpathDriver || pv.Annotations["pv.kubernetes.io/provisioned-by"] != hostpathDriver {
		t.Fatalf("PV %+v %v", pv, err)
	}
	if got := volMust(t, volExec(t, c, "csi-web-0", "c"), "cat /data/f"); got != "hello" {
		t.Errorf("written %q", got)
	}
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "csi-web-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second := waitPod(t, c, ns, "csi-web-0", 120*time.Second, "recreated and running", func(p *v1.Pod) bool {
		return p.UID != first.UID && p.Status.Phase == v1.PodRunning
	})
	if got := volMust(t, volExec(t, c, "csi-web-0", "c"), "cat /data/f"); got != "hello" {
		t.Errorf("the recreated pod %s reads %q", second.UID, got)
	}
	if got := callNames(d.calls("NodeStageVolume", "NodePublishVolume", "NodeUnpublishVolume", "NodeUnstageVolume")); got !=
		"NodeStageVolume,NodePublishVolume,NodeUnpublishVolume,NodeUnstageVolume,NodeStageVolume,NodePublishVolume" {
		t.Errorf("driver calls %s", got)
	}

	// Volume stats: the driver's NodeGetVolumeStats in the summary (with
	// the PVC's reference) and in kubelet_volume_stats_*.
	volMust(t, volExec(t, c, "csi-web-0", "c"), "dd if=/dev/zero of=/data/blob bs=1M count=2 2>/dev/null && sync")
	time.Sleep(2 * time.Second) // volumeStatsAggPeriod
	summaryVolume(t, c, n, ns, "csi-web-0", "data", "data-csi-web-0", 12<<20)
	_, body := c.KubeletAPI(t, n, framework.APICredentials{CertName: "apiserver-kubelet-client"}, "/metrics")
	series := `{namespace="` + ns + `",persistentvolumeclaim="data-csi-web-0"}`
	for _, m := range []string{"capacity_bytes", "available_bytes", "used_bytes", "inodes", "inodes_free", "inodes_used"} {
		if v := sampleValue(t, body, "kubelet_volume_stats_"+m+series); v <= 0 && m != "inodes_used" {
			t.Errorf("kubelet_volume_stats_%s %v", m, v)
		}
	}
	if used := sampleValue(t, body, "kubelet_volume_stats_used_bytes"+series); used < 2<<20 {
		t.Errorf("kubelet_volume_stats_used_bytes %v after writing 2 MiB", used)
	}

	// A generic ephemeral volume: its PVC from the controller manager.
	p := busyboxPod("csi-eph", name, "echo eph > /scratch/f && sleep 3600")
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{
		VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{Spec: v1.PersistentVolumeClaimSpec{
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: ptr.To("e2e-hostpath"),
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("8Mi")}}}}}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	createPods(t, c, ns, p)
	eph := waitPod(t, c, ns, "csi-eph", 120*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	ephPVC, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "csi-eph-scratch", metav1.GetOptions{})
	if err != nil || len(ephPVC.OwnerReferences) != 1 || ephPVC.OwnerReferences[0].UID != eph.UID {
		t.Fatalf("the ephemeral volume's PVC %+v %v", ephPVC, err)
	}
	if got := volMust(t, volExec(t, c, "csi-eph", "c"), "cat /scratch/f"); got != "eph" {
		t.Errorf("ephemeral volume %q", got)
	}
	ephPV, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, ephPVC.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deletePodNow(t, c, ns, "csi-eph")
	framework.Eventually(t, 90*time.Second, 500*time.Millisecond, func() bool {
		_, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "csi-eph-scratch", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false
		}
		for _, call := range d.calls("DeleteVolume") {
			if strings.Contains(call.req, `volume_id:"`+ephPV.Spec.CSI.VolumeHandle+`"`) {
				return true
			}
		}
		return false
	}, "the ephemeral volume's PVC and volume deleted with the pod")
}

// summaryVolume checks the pod's volume in /stats/summary: the PVC's
// reference and a capacity of at least minCapacity, 2 MiB used at least.
func summaryVolume(t *testing.T, c *framework.Cluster, n *framework.Nodelet, ns, pod, vol, claim string, minCapacity uint64) {
	t.Helper()
	_, body := c.KubeletAPI(t, n, framework.APICredentials{CertName: "apiserver-kubelet-client"}, "/stats/summary")
	var sum statsv1alpha1.Summary
	if err := json.Unmarshal([]byte(body), &sum); err != nil {
		t.Fatal(err)
	}
	for _, ps := range sum.Pods {
		if ps.PodRef.Name != pod || ps.PodRef.Namespace != ns {
			continue
		}
		for _, vs := range ps.VolumeStats {
			if vs.Name != vol {
				continue
			}
			if vs.PVCRef == nil || vs.PVCRef.Name != claim || vs.PVCRef.Namespace != ns || vs.CapacityBytes == nil ||
				*vs.CapacityBytes < minCapacity || vs.UsedBytes == nil || *vs.UsedBytes < 2<<20 || vs.Inodes == nil {
				t.Errorf("summary volume %s: PVC %+v, capacity %v used %v inodes %v", vol, vs.PVCRef, deref(vs.CapacityBytes), deref(vs.UsedBytes), deref(vs.Inodes))
			}
			return
		}
		t.Errorf("no volume %s in the summary of %s/%s: %+v", vol, ns, pod, ps.VolumeStats)
		return
	}
	t.Errorf("no pod %s/%s in the summary", ns, pod)
}

func deref(p *uint64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestCSIVolumeExpansion mirrors upstream's "should resize volume when PVC
// is edited while pod is using it" (online expansion) with the host-path
// driver's xfs images (xfs grows online without CAP_SYS_RESOURCE, which
// this machine lacks for ext4) and the project's csiresizer in the place
// of external-resizer: the PVC's request grows, the controller side grows
// the volume and leaves NodeResizePending; nodelet calls NodeExpandVolume
// on the mounted volume, the file system grows inside the running
// container, and the PVC reports the new capacity with its resize status
// and conditions cleared.
func TestCSIVolumeExpansion(t *testing.T) {
	name := "e2e-csi-expand"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	startNode(t, c, n)
	d := startCSIDriver(t, n)
	waitRegistered(t, c, name)
	ensureCSIDriver(t, c, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)})
	startSidecar(t, c, "CSI_PROVISIONER", d, "--timeout=30s")
	resizer, err := framework.BuildTool("./test/fakes/csiresizer")
	if err != nil {
		t.Fatal(err)
	}
	rcmd := exec.Command(resizer, "-csi-address", d.endpoint, "-kubeconfig", c.Env["KUBECONFIG"], "-driver", hostpathDriver)
	rlog, err := os.Create(filepath.Join(filepath.Dir(d.endpoint), "resizer.log"))
	if err != nil {
		t.Fatal(err)
	}
	rcmd.Stdout, rcmd.Stderr = rlog, rlog
	if err := rcmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rcmd.Process.Kill()
		_ = rcmd.Wait()
		rlog.Close()
		if t.Failed() {
			b, _ := os.ReadFile(rlog.Name())
			t.Logf("resizer log:\n%s", b)
		}
	})
	storageClass(t, c, "e2e-hostpath-xfs", map[string]string{"type": "image", "csi.storage.k8s.io/fstype": "xfs"})
	ns := c.Namespace(t, "csi-expand")
	ctx := context.Background()
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: v1.PersistentVolumeClaimSpec{
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: ptr.To("e2e-hostpath-xfs"),
		Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("300Mi")}}}}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := pvcPod("csi-grow", name, "data", "sleep 3600")
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	createPods(t, c, ns, p)
	waitPod(t, c, ns, "csi-grow", 120*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	exec := volExec(t, c, "csi-grow", "c")
	size := func() int64 {
		out := volMust(t, exec, "df -k /data | tail -1 | awk '{print $2}'")
		var kb int64
		if _, err := fmt.Sscan(out, &kb); err != nil {
			t.Fatalf("df: %q", out)
		}
		return kb << 10
	}
	before := size()
	if fs := volMust(t, exec, "grep ' /data ' /proc/mounts | cut -d' ' -f3"); fs != "xfs" {
		t.Fatalf("the volume is %q, want xfs", fs)
	}

	start := time.Now()
	cur, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Resources.Requests[v1.ResourceStorage] = resource.MustParse("400Mi")
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var done *v1.PersistentVolumeClaim
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		got, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		q := got.Status.Capacity[v1.ResourceStorage]
		done = got
		return err == nil && q.Cmp(resource.MustParse("400Mi")) == 0
	}, "the PVC's capacity 400Mi")
	t.Logf("PVC request grown -> capacity reported after node expansion: %v", time.Since(start).Round(10*time.Millisecond))
	if len(done.Status.AllocatedResourceStatuses) != 0 {
		t.Errorf("after the expansion: resize statuses %v", done.Status.AllocatedResourceStatuses)
	}
	for _, cond := range done.Status.Conditions {
		switch cond.Type {
		case v1.PersistentVolumeClaimResizing, v1.PersistentVolumeClaimFileSystemResizePending, v1.PersistentVolumeClaimNodeResizeError:
			t.Errorf("after the expansion: condition %+v", cond)
		}
	}
	if after := size(); after-before < 90<<20 {
		t.Errorf("file system %d -> %d bytes inside the container, want 100 MiB more", before, after)
	}
	if ex := d.calls("NodeExpandVolume"); len(ex) != 1 || !strings.Contains(ex[0].req, "required_bytes:419430400") {
		t.Errorf("NodeExpandVolume calls %+v", ex)
	}
	framework.Eventually(t, 10*time.Second, 200*time.Millisecond, func() bool {
		for _, e := range podEvents(t, c, ns, "csi-grow") {
			if e.Reason == "FileSystemResizeSuccessful" {
				return true
			}
		}
		return false
	}, "FileSystemResizeSuccessful event")
	deletePodNow(t, c, ns, "csi-grow")
}

// TestCSIBlockVolume mirrors upstream's "[Testpattern: Dynamic PV (block
// volmode)] volumes should store data": a provisioned block volume is
// staged at upstream's volumeDevices/staging/<pv> and published as a device
// file at volumeDevices/publish/<pv>/<pod uid>, given to the container at
// its devicePath; the pod writes and reads the raw device; deleted, the
// device is unpublished and unstaged.
func TestCSIBlockVolume(t *testing.T) {
	name := "e2e-csi-block"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	startNode(t, c, n)
	d := startCSIDriver(t, n)
	waitRegistered(t, c, name)
	ensureCSIDriver(t, c, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)})
	startSidecar(t, c, "CSI_PROVISIONER", d, "--timeout=30s")
	storageClass(t, c, "e2e-hostpath-block", map[string]string{"type": "image"})
	ns := c.Namespace(t, "csi-block")
	ctx := context.Background()
	block := v1.PersistentVolumeBlock
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "raw"}, Spec: v1.PersistentVolumeClaimSpec{
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: ptr.To("e2e-hostpath-block"), VolumeMode: &block,
		Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("16Mi")}}}}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := busyboxPod("csi-raw", name, "sleep 3600")
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	p.Spec.Volumes = []v1.Volume{{Name: "raw", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "raw"}}}}
	p.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "raw", DevicePath: "/dev/xvda"}}
	createPods(t, c, ns, p)
	pod := waitPod(t, c, ns, "csi-raw", 120*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	exec := volExec(t, c, "csi-raw", "c")
	volMust(t, exec, "[ -b /dev/xvda ] && printf block-data | dd of=/dev/xvda bs=512 seek=100 conv=notrunc,fsync 2>/dev/null")
	if got := volMust(t, exec, "dd if=/dev/xvda bs=512 skip=100 count=1 2>/dev/null | head -c 10"); got != "block-data" {
		t.Errorf("read back %q from the device", got)
	}
	if got := volMust(t, exec, "blockdev --getsize64 /dev/xvda 2>/dev/null || wc -c </dev/xvda"); got != fmt.Sprint(16<<20) {
		t.Errorf("device size %s", got)
	}
	got, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "raw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv := got.Spec.VolumeName
	staging := filepath.Join(n.RootDir, "plugins", "kubernetes.io", "csi", "volumeDevices", "staging", pv)
	target := filepath.Join(n.RootDir, "plugins", "kubernetes.io", "csi", "volumeDevices", "publish", pv, string(pod.UID))
	calls := d.calls("NodeStageVolume", "NodePublishVolume")
	if callNames(calls) != "NodeStageVolume,NodePublishVolume" {
		t.Fatalf("driver calls %s", callNames(calls))
	}
	if !strings.Contains(calls[0].req, `staging_target_path:"`+staging+`"`) || !strings.Contains(calls[0].req, "block:{}") {
		t.Errorf("NodeStageVolume %s, want block at %s", calls[0].req, staging)
	}
	if !strings.Contains(calls[1].req, `target_path:"`+target+`"`) || !strings.Contains(calls[1].req, "block:{}") {
		t.Errorf("NodePublishVolume %s, want block at %s", calls[1].req, target)
	}
	deletePodNow(t, c, ns, "csi-raw")
	if got := callNames(d.calls("NodeUnpublishVolume", "NodeUnstageVolume")); got != "NodeUnpublishVolume,NodeUnstageVolume" {
		t.Errorf("teardown calls %s", got)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("the device file is left: %v", err)
	}
}
