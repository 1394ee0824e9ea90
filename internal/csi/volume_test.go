package csi

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/ctortest"
	"github.com/nodelet/nodelet/internal/volumes"
)

// The CSI volume plugin against an in-process CSI node plugin: a gRPC
// server on a unix socket, registered the way internal/pluginwatcher does
// (Handler.RegisterPlugin), which records what it is asked and creates the
// targets as a driver would, without mounting anything.

const (
	testDriver = "fake.csi.k8s.io"
	testNode   = "node-1"
	testNS     = "ns"
)

// csiDriver is an in-process CSI node service.
type csiDriver struct {
	csipb.UnimplementedNodeServer
	caps []csipb.NodeServiceCapability_RPC_Type

	mu sync.Mutex
	// calls are the volume calls, in order (not NodeGetInfo or
	// NodeGetCapabilities).
	calls       []string
	stages      []*csipb.NodeStageVolumeRequest
	publishes   []*csipb.NodePublishVolumeRequest
	unpublishes []*csipb.NodeUnpublishVolumeRequest
	unstages    []*csipb.NodeUnstageVolumeRequest
	expands     []*csipb.NodeExpandVolumeRequest
	statsReqs   []*csipb.NodeGetVolumeStatsRequest
	stats       *csipb.NodeGetVolumeStatsResponse
	// fail makes a method (by name) return that error; hang makes it wait
	// for its deadline.
	fail map[string]error
	hang map[string]bool
}

func newCSIDriver(caps ...csipb.NodeServiceCapability_RPC_Type) *csiDriver {
	return &csiDriver{caps: caps, fail: map[string]error{}, hang: map[string]bool{}}
}

func (d *csiDriver) call(ctx context.Context, method string, record func()) error {
	d.mu.Lock()
	if record != nil {
		d.calls = append(d.calls, method)
		record()
	}
	err, hang := d.fail[method], d.hang[method]
	d.mu.Unlock()
	if hang {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	return err
}

func (d *csiDriver) setFail(method string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		delete(d.fail, method)
	} else {
		d.fail[method] = err
	}
}

func (d *csiDriver) setHang(method string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hang[method] = true
}

func (d *csiDriver) setStats(r *csipb.NodeGetVolumeStatsResponse) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats = r
}

func (d *csiDriver) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: testNode}, nil
}

func (d *csiDriver) NodeGetCapabilities(ctx context.Context, _ *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	if err := d.call(ctx, "NodeGetCapabilities", nil); err != nil {
		return nil, err
	}
	resp := &csipb.NodeGetCapabilitiesResponse{}
	for _, c := range d.caps {
		resp.Capabilities = append(resp.Capabilities, &csipb.NodeServiceCapability{
			Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: c}}})
	}
	return resp, nil
}

func (d *csiDriver) NodeStageVolume(ctx context.Context, r *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	if err := d.call(ctx, "NodeStageVolume", func() { d.stages = append(d.stages, r) }); err != nil {
		return nil, err
	}
	return &csipb.NodeStageVolumeResponse{}, nil
}

// NodePublishVolume creates the target as a driver would (a directory, or
// the device file of a block volume), without mounting.
func (d *csiDriver) NodePublishVolume(ctx context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	if err := d.call(ctx, "NodePublishVolume", func() { d.publishes = append(d.publishes, r) }); err != nil {
		return nil, err
	}
	if r.GetVolumeCapability().GetBlock() != nil {
		f, err := os.Create(r.GetTargetPath())
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		f.Close()
	} else if err := os.MkdirAll(r.GetTargetPath(), 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csipb.NodePublishVolumeResponse{}, nil
}

func (d *csiDriver) NodeUnpublishVolume(ctx context.Context, r *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	if err := d.call(ctx, "NodeUnpublishVolume", func() { d.unpublishes = append(d.unpublishes, r) }); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(r.GetTargetPath()); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

func (d *csiDriver) NodeUnstageVolume(ctx context.Context, r *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	if err := d.call(ctx, "NodeUnstageVolume", func() { d.unstages = append(d.unstages, r) }); err != nil {
		return nil, err
	}
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (d *csiDriver) NodeExpandVolume(ctx context.Context, r *csipb.NodeExpandVolumeRequest) (*csipb.NodeExpandVolumeResponse, error) {
	if err := d.call(ctx, "NodeExpandVolume", func() { d.expands = append(d.expands, r) }); err != nil {
		return nil, err
	}
	return &csipb.NodeExpandVolumeResponse{CapacityBytes: r.GetCapacityRange().GetRequiredBytes()}, nil
}

func (d *csiDriver) NodeGetVolumeStats(ctx context.Context, r *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	if err := d.call(ctx, "NodeGetVolumeStats", func() { d.statsReqs = append(d.statsReqs, r) }); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats, nil
}

// got is a copy of what the driver was asked so far.
type got struct {
	calls       []string
	stages      []*csipb.NodeStageVolumeRequest
	publishes   []*csipb.NodePublishVolumeRequest
	unpublishes []*csipb.NodeUnpublishVolumeRequest
	unstages    []*csipb.NodeUnstageVolumeRequest
	expands     []*csipb.NodeExpandVolumeRequest
	statsReqs   []*csipb.NodeGetVolumeStatsRequest
}

func (d *csiDriver) got() got {
	d.mu.Lock()
	defer d.mu.Unlock()
	return got{slices.Clone(d.calls), slices.Clone(d.stages), slices.Clone(d.publishes), slices.Clone(d.unpublishes),
		slices.Clone(d.unstages), slices.Clone(d.expands), slices.Clone(d.statsReqs)}
}

// socketDir is a directory for a unix socket: t.TempDir() unless its path
// is too long for one.
func socketDir(t *testing.T) string {
	dir := t.TempDir()
	if len(dir) < 90 {
		return dir
	}
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// serveDriver serves d on a unix socket and registers it as testDriver in
// drivers, as the plugin watcher does.
func serveDriver(t *testing.T, d *csiDriver, drivers *Drivers) {
	t.Helper()
	path := filepath.Join(socketDir(t), "csi.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csipb.RegisterNodeServer(srv, d)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	h := &Handler{Drivers: drivers, Log: klog.Background()}
	if err := h.RegisterPlugin(context.Background(), testDriver, path, []string{"1.0.0"}); err != nil {
		t.Fatal(err)
	}
}

// env is a plugin with its driver, API objects and clock.
type env struct {
	root    string
	drv     *csiDriver
	drivers *Drivers
	client  *fake.Clientset
	clock   *clocktesting.FakeClock
	rec     *record.FakeRecorder
	p       *VolumePlugin
}

func newEnv(t *testing.T, drv *csiDriver, objs ...runtime.Object) *env {
	t.Helper()
	e := &env{root: t.TempDir(), drv: drv, drivers: &Drivers{}, client: fake.NewClientset(objs...),
		clock: clocktesting.NewFakeClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)), rec: record.NewFakeRecorder(10)}
	serveDriver(t, drv, e.drivers)
	e.p = e.plugin(t)
	return e
}

// plugin is a new VolumePlugin on e's root and drivers (a new process).
func (e *env) plugin(t *testing.T) *VolumePlugin {
	t.Helper()
	p, err := NewVolumePlugin(VolumePluginConfig{RootDir: e.root, NodeName: testNode, Drivers: e.drivers,
		Client: e.client, Clock: e.clock, Recorder: e.rec, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *env) setUp(t *testing.T, pod *v1.Pod, vol string) (string, error) {
	t.Helper()
	for i := range pod.Spec.Volumes {
		if v := &pod.Spec.Volumes[i]; v.Name == vol {
			return e.p.SetUp(context.Background(), &volumes.Volume{Pod: pod, Spec: v, First: true,
				Dir: filepath.Join(e.root, "pods", string(pod.UID), "volumes", DirName, vol)})
		}
	}
	t.Fatalf("pod %s has no volume %s", pod.Name, vol)
	return "", nil
}

func (e *env) mustSetUp(t *testing.T, pod *v1.Pod, vol string) string {
	t.Helper()
	target, err := e.setUp(t, pod, vol)
	if err != nil {
		t.Fatalf("SetUp %s of %s: %v", vol, pod.Name, err)
	}
	return target
}

// volDir is the directory volumes.Manager tears a pod's CSI volume down
// with: <root>/pods/<uid>/volumes/kubernetes.io~csi/<spec name>.
func (e *env) volDir(uid types.UID, specName string) string {
	return filepath.Dir(PublishPath(e.root, string(uid), specName))
}

func testPod(uid types.UID, vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + string(uid), Namespace: testNS, UID: uid},
		Spec: v1.PodSpec{ServiceAccountName: "sa", Volumes: vols}}
}

func pvcVolume(name, claim string, readOnly bool) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly}}}
}

func boundPVC(name, pv string) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("pvc-uid-" + name)},
		Spec:       v1.PersistentVolumeClaimSpec{VolumeName: pv},
		Status:     v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound},
	}
}

// csiPV is a CSI PersistentVolume of testDriver bound to claim.
func csiPV(name, handle string, claim *v1.PersistentVolumeClaim) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: testDriver, VolumeHandle: handle, FSType: "ext4", VolumeAttributes: map[string]string{"share": "a"}}},
			AccessModes:  []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			MountOptions: []string{"noatime"},
			ClaimRef:     &v1.ObjectReference{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
		},
	}
}

// noAttach is testDriver's CSIDriver without attachment.
func noAttach(mutate ...func(*storagev1.CSIDriverSpec)) *storagev1.CSIDriver {
	d := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: testDriver}, Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}
	for _, m := range mutate {
		m(&d.Spec)
	}
	return d
}

func mustContain(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one with %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q, want one with %q", err, p)
		}
	}
}

func wantCalls(t *testing.T, d *csiDriver, want ...string) {
	t.Helper()
	if got := d.got().calls; !slices.Equal(got, want) {
		t.Fatalf("driver calls %v, want %v", got, want)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// A PVC bound to a CSI PV of a driver with STAGE_UNSTAGE_VOLUME is staged
// at the global path, then published at the pod's, with the PV's
// capability and attributes and vol_data.json beside both; the volume is in
// use; a second SetUp is a no-op.
func TestVolumePluginStagesAndPublishesPVC(t *testing.T) {
	drv := newCSIDriver(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	pvc := boundPVC("data", "pv-1")
	e := newEnv(t, drv, pvc, csiPV("pv-1", "vol-1", pvc), noAttach())
	pod := testPod("uid-1", pvcVolume("data", "data", false))

	target := e.mustSetUp(t, pod, "data")
	if want := PublishPath(e.root, "uid-1", "pv-1"); target != want {
		t.Errorf("target %s, want %s", target, want)
	}
	wantCalls(t, drv, "NodeStageVolume", "NodePublishVolume")
	g := drv.got()
	staging := StagingPath(e.root, testDriver, "vol-1")
	st, pub := g.stages[0], g.publishes[0]
	if st.GetVolumeId() != "vol-1" || st.GetStagingTargetPath() != staging || !maps.Equal(st.GetVolumeContext(), map[string]string{"share": "a"}) {
		t.Errorf("NodeStageVolume %v", st)
	}
	if pub.GetVolumeId() != "vol-1" || pub.GetStagingTargetPath() != staging || pub.GetTargetPath() != target || pub.GetReadonly() ||
		!maps.Equal(pub.GetVolumeContext(), map[string]string{"share": "a"}) {
		t.Errorf("NodePublishVolume %v", pub)
	}
	for name, c := range map[string]*csipb.VolumeCapability{"stage": st.GetVolumeCapability(), "publish": pub.GetVolumeCapability()} {
		m := c.GetMount()
		if m == nil || m.GetFsType() != "ext4" || !slices.Equal(m.GetMountFlags(), []string{"noatime"}) || m.GetVolumeMountGroup() != "" ||
			c.GetAccessMode().GetMode() != csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER {
			t.Errorf("%s capability %v", name, c)
		}
	}
	if len(st.GetPublishContext()) != 0 || len(pub.GetPublishContext()) != 0 {
		t.Errorf("publish context without attachment: %v %v", st.GetPublishContext(), pub.GetPublishContext())
	}
	data, err := ReadVolData(filepath.Dir(target))
	if err != nil {
		t.Fatal(err)
	}
	if want := (VolData{SpecVolID: "pv-1", VolumeHandle: "vol-1", DriverName: testDriver, NodeName: testNode,
		VolumeLifecycleMode: "Persistent", AttachmentID: AttachmentID("vol-1", testDriver, testNode)}); data != want {
		t.Errorf("publish vol_data %+v, want %+v", data, want)
	}
	if sd, err := ReadVolData(filepath.Dir(staging)); err != nil || sd.VolumeHandle != "vol-1" || sd.DriverName != testDriver {
		t.Errorf("staging vol_data %+v, %v", sd, err)
	}
	if in := e.p.InUse(); !slices.Equal(in, []v1.UniqueVolumeName{"kubernetes.io/csi/" + testDriver + "^vol-1"}) {
		t.Errorf("in use %v", in)
	}

	// Every sync sets the volume up again: nothing more of the driver.
	again := e.mustSetUp(t, pod, "data")
	if again != target {
		t.Errorf("second SetUp %s, want %s", again, target)
	}
	wantCalls(t, drv, "NodeStageVolume", "NodePublishVolume")
}

// Without STAGE_UNSTAGE_VOLUME the volume is only published, with no
// staging path, and teardown only unpublishes.
func TestVolumePluginPublishesOnlyWithoutStageCapability(t *testing.T) {
	drv := newCSIDriver()
	pvc := boundPVC("data", "pv-1")
	e := newEnv(t, drv, pvc, csiPV("pv-1", "vol-1", pvc), noAttach())
	pod := testPod("uid-1", pvcVolume("data", "data", false))

	target := e.mustSetUp(t, pod, "data")
	wantCalls(t, drv, "NodePublishVolume")
	if pub := drv.got().publishes[0]; pub.GetStagingTargetPath() != "" || pub.GetTargetPath() != target {
		t.Errorf("NodePublishVolume %v", pub)
	}
	if exists(filepath.Dir(StagingPath(e.root, testDriver, "vol-1"))) {
		t.Error("a staging directory without STAGE_UNSTAGE_VOLUME")
	}
	if err := e.p.TearDown(context.Background(), e.volDir("uid-1", "pv-1")); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, drv, "NodePublishVolume", "NodeUnpublishVolume")
}

// A driver that needs attachment (no CSIDriver: upstream's default) waits
// for its VolumeAttachment; its attachment metadata is the publish context
// of both calls.
func TestVolumePluginWaitsForAttachment(t *testing.T) {
	drv := newCSIDriver(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	pvc := boundPVC("data", "pv-1")
	e := newEnv(t, drv, pvc, csiPV("pv-1", "vol-1", pvc))
	pod := testPod("uid-1", pvcVolume("data", "data", false))
	ctx := context.Background()

	_, err := e.setUp(t, pod, "data")
	mustContain(t, err, "volume vol-1 is not attached to the node yet")
	id := AttachmentID("vol-1", testDriver, testNode)
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: id},
		Status: storagev1.VolumeAttachmentStatus{AttachError: &storagev1.VolumeError{Message: "no such disk"}}}
	if _, err := e.client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = e.setUp(t, pod, "data")
	mustContain(t, err, "not attached to the node yet (VolumeAttachment "+id+"): no such disk")
	wantCalls(t, drv)

	va.Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"devicePath": "/dev/vdb"}}
	if _, err := e.client.StorageV1().VolumeAttachments().Update(ctx, va, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.mustSetUp(t, pod, "data")
	g := drv.got()
	if len(g.stages) != 1 || len(g.publishes) != 1 {
		t.Fatalf("calls %v", g.calls)
	}
	want := map[string]string{"devicePath": "/dev/vdb"}
	if !maps.Equal(g.stages[0].GetPublishContext(), want) || !maps.Equal(g.publishes[0].GetPublishContext(), want) {
		t.Errorf("publish context %v, %v, want %v", g.stages[0].GetPublishContext(), g.publishes[0].GetPublishContext(), want)
	}
}

// A volume two pods use is staged once and published for each; tearing the
// first pod down unpublishes its target only, the last one unstages.
func TestVolumePluginTearDownUnstagesAfterLastPod(t *testing.T) {
	drv := newCSIDriver(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	pvc := boundPVC("data", "pv-1")
	e := newEnv(t, drv, pvc, csiPV("pv-1", "vol-1", pvc), noAttach())
	ctx := context.Background()
	pod1, pod2 := testPod("uid-1", pvcVolume("data", "data", false)), testPod("uid-2", pvcVolume("shared", "data", false))

	t1 := e.mustSetUp(t, pod1, "data")
	t2 := e.mustSetUp(t, pod2, "shared")
	if t1 == t2 {
		t.Fatalf("both pods published at %s", t1)
	}
	wantCalls(t, drv, "NodeStageVolume", "NodePublishVolume", "NodePublishVolume")
	staging := StagingPath(e.root, testDriver, "vol-1")

	if err := e.p.TearDown(ctx, e.volDir("uid-1", "pv-1")); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, drv, "NodeStageVolume", "NodePublishVolume", "NodePublishVolume", "NodeUnpublishVolume")
	if up := drv.got().unpublishes[0]; up.GetVolumeId() != "vol-1" || up.GetTargetPath() != t1 {
		t.Errorf("NodeUnpublishVolume %v, want target %s", up, t1)
	}
	if exists(e.volDir("uid-1", "pv-1")) {
		t.Error("the first pod's volume directory is left")
	}
	if !exists(staging) {
		t.Error("unstaged while the second pod uses the volume")
	}
	if in := e.p.InUse(); len(in) != 1 {
		t.Errorf("in use %v while the second pod has it", in)
	}

	if err := e.p.TearDown(ctx, e.volDir("uid-2", "pv-1")); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, drv, "NodeStageVolume", "NodePublishVolume", "NodePublishVolume", "NodeUnpublishVolume", "NodeUnpublishVolume", "NodeUnstageVolume")
	g := drv.got()
	if g.unpublishes[1].GetTargetPath() != t2 {
		t.Errorf("second NodeUnpublishVolume %v, want target %s", g.unpublishes[1], t2)
	}
	if us := g.unstages[0]; us.GetVolumeId() != "vol-1" || us.GetStagingTargetPath() != staging {
		t.Errorf("NodeUnstageVolume %v, want %s", us, staging)
	}
	if exists(filepath.Dir(staging)) {
		t.Error("the staging directory is left")
	}
	if in := e.p.InUse(); len(in) != 0 {
		t.Errorf("in use %v after teardown", in)
	}

	// Set up again after the unstage: staged again.
	e.mustSetUp(t, pod1, "data")
	if g := drv.got(); len(g.stages) != 2 {
		t.Errorf("calls %v: not staged again after NodeUnstageVolume", g.calls)
	}
}

// After a restart a new plugin tears a volume down from its directories
// alone: unpublish, then unstage.
func TestVolumePluginTearDownAfterRestart(t *testing.T) {
	drv := newCSIDriver(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	pvc := boundPVC("data", "pv-1")
	e := newEnv(t, drv, pvc, csiPV("pv-1", "vol-1", pvc), noAttach())
	target := e.mustSetUp(t, testPod("uid-1", pvcVolume("data", "data", false)), "data")

	restarted := e.plugin(t)
	if err := restarted.TearDown(context.Background(), e.volDir("uid-1", "pv-1")); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, drv, "NodeStageVolume", "NodePublishVolume", "NodeUnpublishVolume", "NodeUnstageVolume")
	g := drv.got()
	if g.unpublishes[0].GetTargetPath() != target || g.unstages[0].GetStagingTargetPath() != StagingPath(e.root, testDriver, "vol-1") {
		t.Errorf("unpublish %v, unstage %v", g.unpublishes[0], g.unstages[0])
	}
}

// A directory without vol_data.json was never published: nothing to undo.
// A volume of a driver no longer registered cannot be torn down.
func TestVolumePluginTearDownEdges(t *testing.T) {
	drv := newCSIDriver(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	pvc := boundPVC("data", "pv-1")
	e := newEnv(t, drv, pvc, csiPV("pv-1", "vol-1", pvc), noAttach())
	ctx := context.Background()

	empty := e.volDir("uid-9", "never")
	if err := os.MkdirAll(empty, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := e.p.TearDown(ctx, empty); err != nil {
		t.Errorf("TearDown of a volume never published: %v", err)
	}
	wantCalls(t, drv)

	e.mustSetUp(t, testPod("uid-1", pvcVolume("data", "data", false)), "data")
	(&Handler{Drivers: e.drivers, Log: klog.Background()}).DeRegisterPlugin(testDriver, "")
	err := e.p.TearDown(ctx, e.volDir("uid-1", "pv-1"))
	mustContain(t, err, NotRegistered(testDriver).Error())
	if _, err := ReadVolData(e.volDir("uid-1", "pv-1")); err != nil {
		t.Errorf("the record of a volume not torn down is gone: %v", err)
	}
}

// A failing NodePublishVolume (or NodeStageVolume) is SetUp's error, and the
// volume is not taken as set up: the next SetUp calls the driver again
// (without staging twice).
func TestVolumePluginDriverErrors(t *testing.T) {
	drv := newCSIDriver(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	pvc := boundPVC("data", "pv-1")
	e := newEnv(t, drv, pvc, csiPV("pv-1", "vol-1", pvc), noAttach())
	pod := testPod("uid-1", pvcVolume("data", "data", false))

	drv.setFail("NodeStageVolume", status.Error(codes.Unavailable, "backend unreachable"))
	_, err := e.setUp(t, pod, "data")
	mustContain(t, err, "rpc NodeStageVolume", "backend unreachable")
	wantCalls(t, drv, "NodeStageVolume")

	drv.setFail("NodeStageVolume", nil)
	drv.setFail("NodePublishVolume", status.Error(codes.Internal, "disk on fire"))
	_, err = e.setUp(t, pod, "data")
	mustContain(t, err, "rpc NodePublishVolume", "disk on fire")
	wantCalls(t, drv, "NodeStageVolume", "NodeStageVolume", "NodePublishVolume")
	if len(e.p.InUse()) != 0 {
		t.Errorf("in use after a failed publish: %v", e.p.InUse())
	}

	drv.setFail("NodePublishVolume", nil)
	e.mustSetUp(t, pod, "data")
	wantCalls(t, drv, "NodeStageVolume", "NodeStageVolume", "NodePublishVolume", "NodePublishVolume")

	// NodeGetCapabilities failing: nothing else is asked.
	drv.setFail("NodeGetCapabilities", status.Error(codes.Unavailable, "restarting"))
	_, err = e.setUp(t, testPod("uid-2", pvcVolume("data", "data", false)), "data")
	mustContain(t, err, "NodeGetCapabilities", "restarting")
	wantCalls(t, drv, "NodeStageVolume", "NodeStageVolume", "NodePublishVolume", "NodePublishVolume")
}

// A hung driver fails the SetUp after the plugin's Timeout.
func TestVolumePluginTimeout(t *testing.T) {
	drv := newCSIDriver()
	pvc := boundPVC("data", "pv-1")
	e := newEnv(t, drv, pvc, csiPV("pv-1", "vol-1", pvc), noAttach())
	p, err := NewVolumePlugin(VolumePluginConfig{RootDir: e.root, NodeName: testNode, Drivers: e.drivers, Client: e.client,
		Clock: e.clock, Timeout: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// A first volume connects to the driver: the timeout is only the hung
	// call's.
	warm := testPod("uid-0", pvcVolume("data", "data", false))
	if _, err := p.SetUp(context.Background(), &volumes.Volume{Pod: warm, Spec: &warm.Spec.Volumes[0], First: true}); err != nil {
		t.Fatal(err)
	}
	drv.setHang("NodePublishVolume")
	pod := testPod("uid-1", pvcVolume("data", "data", false))
	_, err = p.SetUp(context.Background(), &volumes.Volume{Pod: pod, Spec: &pod.Spec.Volumes[0], First: true})
	mustContain(t, err, "rpc NodePublishVolume")
	if status.Code(errors.Unwrap(err)) != codes.DeadlineExceeded {
		t.Errorf("error %v, want DeadlineExceeded", err)
	}
}

// A volume of a driver the node does not have fails with upstream's error,
// asking no driver anything.
func TestVolumePluginDriverNotRegistered(t *testing.T) {
	drv := newCSIDriver(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	pvc := boundPVC("data", "pv-1")
	pv := csiPV("pv-1", "vol-1", pvc)
	pv.Spec.CSI.Driver = "other.csi.k8s.io"
	e := newEnv(t, drv, pvc, pv)
	_, err := e.setUp(t, testPod("uid-1", pvcVolume("data", "data", false)), "data")
	mustContain(t, err, "driver name other.csi.k8s.io not found in the list of registered CSI drivers")
	wantCalls(t, drv)
	if exists(filepath.Join(e.root, "pods")) {
		t.Error("pod directories made for a volume that cannot be set up")
	}
}

// What cannot be resolved to a CSI volume fails with its reason before any
// driver call.
func TestVolumePluginResolveErrors(t *testing.T) {
	drv := newCSIDriver()
	bound := boundPVC("data", "pv-1")
	unbound := boundPVC("pending", "")
	unbound.Status.Phase = v1.ClaimPending
	other := boundPVC("other", "pv-2")
	nfs := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-nfs"}, Spec: v1.PersistentVolumeSpec{
		PersistentVolumeSource: v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}},
		ClaimRef:               &v1.ObjectReference{UID: "pvc-uid-nfs"}}}
	nfsClaim := boundPVC("nfs", "pv-nfs")
	nfsClaim.UID = "pvc-uid-nfs"
	e := newEnv(t, drv, bound, csiPV("pv-1", "vol-1", bound), unbound, other, csiPV("pv-2", "vol-2", bound), nfsClaim, nfs, noAttach())
	for _, tc := range []struct {
		claim, want string
	}{
		{"missing", `error processing PVC ns/missing`},
		{"pending", "PVC is not bound"},
		{"other", "PV pv-2 is not bound to it"},
		{"nfs", "only CSI persistent volumes are supported"},
	} {
		_, err := e.setUp(t, testPod("uid-1", pvcVolume("v", tc.claim, false)), "v")
		mustContain(t, err, tc.want)
	}
	wantCalls(t, drv)

	standalone, err := NewVolumePlugin(VolumePluginConfig{RootDir: e.root, NodeName: testNode, Drivers: e.drivers})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod("uid-1", pvcVolume("v", "data", false),
		v1.Volume{Name: "inline", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: testDriver}}})
	for i, want := range []string{"persistent volumes need the API server", "inline CSI volumes need the API server"} {
		_, err := standalone.SetUp(context.Background(), &volumes.Volume{Pod: pod, Spec: &pod.Spec.Volumes[i]})
		mustContain(t, err, want)
	}
	wantCalls(t, drv)
}

// A read-only PVC volume is published read-only.
func TestVolumePluginReadOnlyClaim(t *testing.T) {
	drv := newCSIDriver(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	pvc := boundPVC("data", "pv-1")
	e := newEnv(t, drv, pvc, csiPV("pv-1", "vol-1", pvc), noAttach())
	e.mustSetUp(t, testPod("uid-1", pvcVolume("ro", "data", true)), "ro")
	e.mustSetUp(t, testPod("uid-2", pvcVolume("rw", "data", false)), "rw")
	g := drv.got()
	if len(g.publishes) != 2 || !g.publishes[0].GetReadonly() || g.publishes[1].GetReadonly() {
		t.Errorf("publishes %v, want read-only then read-write", g.publishes)
	}
}

// An inline (ephemeral) CSI volume is published without staging, with the
// pod's information when the CSIDriver asks for it, under a handle derived
// from the pod and volume; it is not a volume in use, and teardown only
// unpublishes.
func TestVolumePluginInlineVolume(t *testing.T) {
	drv := newCSIDriver(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	e := newEnv(t, drv, noAttach(func(s *storagev1.CSIDriverSpec) {
		s.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}
		s.PodInfoOnMount = ptr.To(true)
	}))
	pod := testPod("uid-1", v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{
		Driver: testDriver, ReadOnly: ptr.To(true), FSType: ptr.To("xfs"), VolumeAttributes: map[string]string{"size": "1Gi"}}}})

	target := e.mustSetUp(t, pod, "scratch")
	if want := PublishPath(e.root, "uid-1", "scratch"); target != want {
		t.Errorf("target %s, want %s", target, want)
	}
	wantCalls(t, drv, "NodePublishVolume")
	pub := drv.got().publishes[0]
	wantCtx := map[string]string{"size": "1Gi", KeyPodName: "web-uid-1", KeyPodNamespace: testNS, KeyPodUID: "uid-1",
		KeyServiceAccount: "sa", KeyEphemeral: "true"}
	if pub.GetVolumeId() != InlineHandle("uid-1", "scratch") || pub.GetStagingTargetPath() != "" || !pub.GetReadonly() ||
		pub.GetVolumeCapability().GetMount().GetFsType() != "xfs" || !maps.Equal(pub.GetVolumeContext(), wantCtx) {
		t.Errorf("NodePublishVolume %v, want volume context %v", pub, wantCtx)
	}
	if data, err := ReadVolData(filepath.Dir(target)); err != nil || data.VolumeLifecycleMode != "Ephemeral" {
		t.Errorf("vol_data %+v, %v", data, err)
	}
	if in := e.p.InUse(); len(in) != 0 {
		t.Errorf("an inline volume in use: %v", in)
	}
	if err := e.p.TearDown(context.Background(), filepath.Dir(target)); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, drv, "NodePublishVolume", "NodeUnpublishVolume")
}

// Inline volumes need a CSIDriver that lists the Ephemeral mode.
func TestVolumePluginInlineVolumeRefused(t *testing.T) {
	inline := v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: testDriver}}}
	for _, tc := range []struct {
		name string
		objs []runtime.Object
		want string
	}{
		{"no CSIDriver", nil, "no CSIDriver object"},
		{"persistent only", []runtime.Object{noAttach()}, `only supports ["Persistent"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drv := newCSIDriver()
			e := newEnv(t, drv, tc.objs...)
			_, err := e.setUp(t, testPod("uid-1", inline), "scratch")
			mustContain(t, err, "failed to check volume lifecycle mode", tc.want)
			wantCalls(t, drv)
		})
	}
}

// podInfoOnMount adds the pod's information to a persistent volume's
// NodePublishVolume (ephemeral "false"), not to its NodeStageVolume.
func TestVolumePluginPodInfoOnMountPersistent(t *testing.T) {
	drv := newCSIDriver(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	pvc := boundPVC("data", "pv-1")
	e := newEnv(t, drv, pvc, csiPV("pv-1", "vol-1", pvc), noAttach(func(s *storagev1.CSIDriverSpec) { s.PodInfoOnMount = ptr.To(true) }))
	e.mustSetUp(t, testPod("uid-1", pvcVolume("data", "data", false)), "data")
	g := drv.got()
	if !maps.Equal(g.stages[0].GetVolumeContext(), map[string]string{"share": "a"}) {
		t.Errorf("stage volume context %v", g.stages[0].GetVolumeContext())
	}
	want := map[string]string{"share": "a", KeyPodName: "web-uid-1", KeyPodNamespace: testNS, KeyPodUID: "uid-1",
		KeyServiceAccount: "sa", KeyEphemeral: "false"}
	if !maps.Equal(g.publishes[0].GetVolumeContext(), want) {
		t.Errorf("publish volume context %v, want %v", g.publishes[0].GetVolumeContext(), want)
	}
}

// The pod's fsGroup: the driver applies it (VOLUME_MOUNT_GROUP, in the
// capability of both calls), or nodelet does on the target (an fsType and
// ReadWriteOnce, as upstream), or nobody (fsGroupPolicy None).
func TestVolumePluginFSGroup(t *testing.T) {
	none := storagev1.NoneFSGroupPolicy
	for _, tc := range []struct {
		name       string
		caps       []csipb.NodeServiceCapability_RPC_Type
		policy     *storagev1.FSGroupPolicy
		mountGroup string
		chowned    bool
	}{
		{"the driver applies it", []csipb.NodeServiceCapability_RPC_Type{csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP}, nil, "2345", false},
		{"nodelet applies it", nil, nil, "", true},
		{"policy None", nil, &none, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drv := newCSIDriver(append(tc.caps, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)...)
			pvc := boundPVC("data", "pv-1")
			e := newEnv(t, drv, pvc, csiPV("pv-1", "vol-1", pvc), noAttach(func(s *storagev1.CSIDriverSpec) { s.FSGroupPolicy = tc.policy }))
			pod := testPod("uid-1", pvcVolume("data", "data", false))
			pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](2345)}
			target := e.mustSetUp(t, pod, "data")
			g := drv.got()
			if mg := g.stages[0].GetVolumeCapability().GetMount().GetVolumeMountGroup(); mg != tc.mountGroup {
				t.Errorf("stage volume mount group %q, want %q", mg, tc.mountGroup)
			}
			if mg := g.publishes[0].GetVolumeCapability().GetMount().GetVolumeMountGroup(); mg != tc.mountGroup {
				t.Errorf("publish volume mount group %q, want %q", mg, tc.mountGroup)
			}
			fi, err := os.Stat(target)
			if err != nil {
				t.Fatal(err)
			}
			chowned := fi.Sys().(*syscall.Stat_t).Gid == 2345 && fi.Mode()&os.ModeSetgid != 0
			if chowned != tc.chowned {
				t.Errorf("target group %d, mode %v: chowned %v, want %v", fi.Sys().(*syscall.Stat_t).Gid, fi.Mode(), chowned, tc.chowned)
			}
		})
	}
}

// A block PV is staged and published at upstream's volumeDevices paths
// with a block capability; the pod's record names the device, so teardown
// unpublishes and unstages those paths.
func TestVolumePluginBlockVolume(t *testing.T) {
	drv := newCSIDriver(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	pvc := boundPVC("data", "pv-1")
	pv := csiPV("pv-1", "vol-1", pvc)
	pv.Spec.VolumeMode = ptr.To(v1.PersistentVolumeBlock)
	e := newEnv(t, drv, pvc, pv, noAttach())

	target := e.mustSetUp(t, testPod("uid-1", pvcVolume("dev", "data", false)), "dev")
	if want := BlockPublishPath(e.root, "pv-1", "uid-1"); target != want {
		t.Errorf("target %s, want %s", target, want)
	}
	wantCalls(t, drv, "NodeStageVolume", "NodePublishVolume")
	g := drv.got()
	staging := BlockStagingPath(e.root, "pv-1")
	if g.stages[0].GetStagingTargetPath() != staging || g.stages[0].GetVolumeCapability().GetBlock() == nil {
		t.Errorf("NodeStageVolume %v", g.stages[0])
	}
	if p := g.publishes[0]; p.GetStagingTargetPath() != staging || p.GetTargetPath() != target || p.GetVolumeCapability().GetBlock() == nil {
		t.Errorf("NodePublishVolume %v", p)
	}
	dir := e.volDir("uid-1", "pv-1")
	if data, err := ReadVolData(dir); err != nil || data.DevicePath != target {
		t.Errorf("vol_data %+v, %v: want the device path %s", data, err, target)
	}

	if err := e.p.TearDown(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, drv, "NodeStageVolume", "NodePublishVolume", "NodeUnpublishVolume", "NodeUnstageVolume")
	g = drv.got()
	if g.unpublishes[0].GetTargetPath() != target || g.unstages[0].GetStagingTargetPath() != staging {
		t.Errorf("unpublish %v, unstage %v", g.unpublishes[0], g.unstages[0])
	}
	for _, p := range []string{dir, staging, filepath.Dir(target)} {
		if exists(p) {
			t.Errorf("%s is left", p)
		}
	}
}

// The PV's stage and publish secrets are read and passed to their calls; a
// missing one fails the SetUp.
func TestVolumePluginSecrets(t *testing.T) {
	drv := newCSIDriver(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	pvc := boundPVC("data", "pv-1")
	pv := csiPV("pv-1", "vol-1", pvc)
	pv.Spec.CSI.NodeStageSecretRef = &v1.SecretReference{Namespace: "kube-system", Name: "stage"}
	pv.Spec.CSI.NodePublishSecretRef = &v1.SecretReference{Namespace: "kube-system", Name: "publish"}
	stage := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "stage"}, Data: map[string][]byte{"key": []byte("s")}}
	e := newEnv(t, drv, pvc, pv, noAttach(), stage)
	pod := testPod("uid-1", pvcVolume("data", "data", false))

	_, err := e.setUp(t, pod, "data")
	mustContain(t, err, "fetching secret kube-system/publish failed")
	publish := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "publish"}, Data: map[string][]byte{"key": []byte("p")}}
	if _, err := e.client.CoreV1().Secrets("kube-system").Create(context.Background(), publish, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.mustSetUp(t, pod, "data")
	g := drv.got()
	if !maps.Equal(g.stages[0].GetSecrets(), map[string]string{"key": "s"}) {
		t.Errorf("stage secrets %v", g.stages[0].GetSecrets())
	}
	if len(g.publishes) != 1 || !maps.Equal(g.publishes[0].GetSecrets(), map[string]string{"key": "p"}) {
		t.Errorf("publishes %v", g.publishes)
	}
}

// The CSIDriver's token requests: a token per audience for the pod's
// service account, in the volume context or (serviceAccountTokenInSecrets)
// in the secrets.
func TestVolumePluginTokens(t *testing.T) {
	for _, inSecrets := range []bool{false, true} {
		t.Run(map[bool]string{false: "volume context", true: "secrets"}[inSecrets], func(t *testing.T) {
			drv := newCSIDriver()
			pvc := boundPVC("data", "pv-1")
			e := newEnv(t, drv, pvc, csiPV("pv-1", "vol-1", pvc), noAttach(func(s *storagev1.CSIDriverSpec) {
				s.TokenRequests = []storagev1.TokenRequest{{Audience: "vault", ExpirationSeconds: ptr.To[int64](600)}}
				s.ServiceAccountTokenInSecrets = ptr.To(inSecrets)
			}))
			var req *authenticationv1.TokenRequest
			e.client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
				ca := a.(k8stesting.CreateAction)
				if ca.GetSubresource() != "token" {
					return false, nil, nil
				}
				if ca.GetNamespace() != testNS || ca.(k8stesting.CreateActionImpl).Name != "sa" {
					return true, nil, errors.New("token for the wrong service account")
				}
				req = ca.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
				req.Status = authenticationv1.TokenRequestStatus{Token: "tok-" + req.Spec.Audiences[0]}
				return true, req, nil
			})
			e.mustSetUp(t, testPod("uid-1", pvcVolume("data", "data", false)), "data")
			if req == nil || !slices.Equal(req.Spec.Audiences, []string{"vault"}) || *req.Spec.ExpirationSeconds != 600 ||
				req.Spec.BoundObjectRef == nil || req.Spec.BoundObjectRef.UID != "uid-1" {
				t.Fatalf("token request %+v", req)
			}
			pub := drv.got().publishes[0]
			where, other := pub.GetVolumeContext(), pub.GetSecrets()
			if inSecrets {
				where, other = other, where
			}
			var tokens map[string]authenticationv1.TokenRequestStatus
			if err := json.Unmarshal([]byte(where[KeyTokens]), &tokens); err != nil || tokens["vault"].Token != "tok-vault" {
				t.Errorf("%s %q: %v", KeyTokens, where[KeyTokens], err)
			}
			if _, ok := other[KeyTokens]; ok {
				t.Errorf("tokens in both the volume context and the secrets")
			}
		})
	}
}

// requiresRepublish: the volume is published again once a period has
// passed (not before), without staging again; other drivers' never.
func TestVolumePluginRepublish(t *testing.T) {
	for _, republish := range []bool{false, true} {
		t.Run(map[bool]string{false: "not required", true: "required"}[republish], func(t *testing.T) {
			drv := newCSIDriver(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
			pvc := boundPVC("data", "pv-1")
			e := newEnv(t, drv, pvc, csiPV("pv-1", "vol-1", pvc), noAttach(func(s *storagev1.CSIDriverSpec) {
				s.RequiresRepublish = ptr.To(republish)
			}))
			pod := testPod("uid-1", pvcVolume("data", "data", false))
			target := e.mustSetUp(t, pod, "data")
			e.clock.Step(republishPeriod - time.Second)
			e.mustSetUp(t, pod, "data")
			wantCalls(t, drv, "NodeStageVolume", "NodePublishVolume")

			e.clock.Step(time.Second)
			if again := e.mustSetUp(t, pod, "data"); again != target {
				t.Errorf("republished at %s, want %s", again, target)
			}
			e.mustSetUp(t, pod, "data")
			if republish {
				wantCalls(t, drv, "NodeStageVolume", "NodePublishVolume", "NodePublishVolume")
				if p := drv.got().publishes[1]; p.GetTargetPath() != target {
					t.Errorf("republish %v", p)
				}
			} else {
				wantCalls(t, drv, "NodeStageVolume", "NodePublishVolume")
			}
		})
	}
}

// VolumeStats asks the driver (GET_VOLUME_STATS) for a volume this process
// published and reuses the answer for StatsPeriod.
func TestVolumePluginVolumeStats(t *testing.T) {
	drv := newCSIDriver(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME, csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS)
	drv.setStats(&csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
		{Unit: csipb.VolumeUsage_BYTES, Total: 1000, Available: 600, Used: 400},
		{Unit: csipb.VolumeUsage_INODES, Total: 10, Available: 7, Used: 3},
	}})
	pvc := boundPVC("data", "pv-1")
	e := newEnv(t, drv, pvc, csiPV("pv-1", "vol-1", pvc), noAttach())
	ctx := context.Background()
	if _, ok := e.p.VolumeStats(ctx, "uid-1", "data"); ok {
		t.Error("stats of a volume not set up")
	}
	target := e.mustSetUp(t, testPod("uid-1", pvcVolume("data", "data", false)), "data")

	u, ok := e.p.VolumeStats(ctx, "uid-1", "data")
	if !ok {
		t.Fatal("no stats")
	}
	if *u.Capacity != 1000 || *u.Available != 600 || *u.Used != 400 || *u.Inodes != 10 || *u.InodesFree != 7 || *u.InodesUsed != 3 ||
		u.Namespace != testNS || u.Claim != "data" || !u.Time.Equal(e.clock.Now()) {
		t.Errorf("usage %+v", u)
	}
	g := drv.got()
	if len(g.statsReqs) != 1 || g.statsReqs[0].GetVolumeId() != "vol-1" || g.statsReqs[0].GetVolumePath() != target {
		t.Fatalf("stats requests %v", g.statsReqs)
	}
	e.clock.Step(time.Minute - time.Second)
	if _, ok := e.p.VolumeStats(ctx, "uid-1", "data"); !ok || len(drv.got().statsReqs) != 1 {
		t.Errorf("asked again within the period: %d requests", len(drv.got().statsReqs))
	}
	e.clock.Step(time.Second)
	drv.setStats(&csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{{Unit: csipb.VolumeUsage_BYTES, Total: 1000, Available: 500, Used: 500}}})
	u, ok = e.p.VolumeStats(ctx, "uid-1", "data")
	if !ok || len(drv.got().statsReqs) != 2 || *u.Used != 500 || u.Inodes != nil {
		t.Errorf("after the period: %+v, %d requests", u, len(drv.got().statsReqs))
	}
}

func TestVolumePluginVolumeStatsWithoutCapability(t *testing.T) {
	drv := newCSIDriver()
	pvc := boundPVC("data", "pv-1")
	e := newEnv(t, drv, pvc, csiPV("pv-1", "vol-1", pvc), noAttach())
	e.mustSetUp(t, testPod("uid-1", pvcVolume("data", "data", false)), "data")
	if u, ok := e.p.VolumeStats(context.Background(), "uid-1", "data"); ok {
		t.Errorf("stats %+v without GET_VOLUME_STATS", u)
	}
	wantCalls(t, drv, "NodePublishVolume")
}

// A PVC the controller grew (NodeResizePending, PV larger than the PVC's
// capacity) is expanded on the node (NodeExpandVolume) and its status
// finished; a failing driver leaves a NodeResizeError condition and a
// warning.
func TestVolumePluginExpansion(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(map[bool]string{false: "expanded", true: "driver fails"}[fail], func(t *testing.T) {
			drv := newCSIDriver(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME, csipb.NodeServiceCapability_RPC_EXPAND_VOLUME)
			if fail {
				drv.setFail("NodeExpandVolume", status.Error(codes.Internal, "resize2fs failed"))
			}
			pvc := boundPVC("data", "pv-1")
			pvc.Status.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}
			pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: v1.PersistentVolumeClaimNodeResizePending}
			pv := csiPV("pv-1", "vol-1", pvc)
			pv.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")}
			e := newEnv(t, drv, pvc, pv, noAttach())
			ctx := context.Background()
			target := e.mustSetUp(t, testPod("uid-1", pvcVolume("data", "data", false)), "data")

			e.p.expandAll(ctx)
			g := drv.got()
			if len(g.expands) != 1 {
				t.Fatalf("calls %v, want one NodeExpandVolume", g.calls)
			}
			x := g.expands[0]
			if x.GetVolumeId() != "vol-1" || x.GetVolumePath() != target || x.GetStagingTargetPath() != StagingPath(e.root, testDriver, "vol-1") ||
				x.GetCapacityRange().GetRequiredBytes() != 2<<30 {
				t.Errorf("NodeExpandVolume %v", x)
			}
			got, err := e.client.CoreV1().PersistentVolumeClaims(testNS).Get(ctx, "data", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			event := <-e.rec.Events
			size := got.Status.Capacity[v1.ResourceStorage]
			if !fail {
				if size.Cmp(resource.MustParse("2Gi")) != 0 || len(got.Status.AllocatedResourceStatuses) != 0 {
					t.Errorf("PVC status %+v", got.Status)
				}
				if !strings.HasPrefix(event, "Normal FileSystemResizeSuccessful") {
					t.Errorf("event %q", event)
				}
				// Done: not expanded again.
				e.p.expandAll(ctx)
				if n := len(drv.got().expands); n != 1 {
					t.Errorf("%d NodeExpandVolume calls after the expansion finished", n)
				}
				return
			}
			if size.Cmp(resource.MustParse("1Gi")) != 0 ||
				got.Status.AllocatedResourceStatuses[v1.ResourceStorage] != v1.PersistentVolumeClaimNodeResizeInProgress {
				t.Errorf("PVC status %+v", got.Status)
			}
			if n := len(got.Status.Conditions); n != 1 || got.Status.Conditions[0].Type != v1.PersistentVolumeClaimNodeResizeError ||
				!strings.Contains(got.Status.Conditions[0].Message, "resize2fs failed") {
				t.Errorf("conditions %+v", got.Status.Conditions)
			}
			if !strings.HasPrefix(event, "Warning VolumeResizeFailed") || !strings.Contains(event, "resize2fs failed") {
				t.Errorf("event %q", event)
			}
		})
	}
}

func TestVolumePluginCanSupport(t *testing.T) {
	p := &VolumePlugin{}
	for _, tc := range []struct {
		src  v1.VolumeSource
		want bool
	}{
		{v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: testDriver}}, true},
		{v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}, true},
		{v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}, true},
		{v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}, false},
	} {
		if got := p.CanSupport(&v1.Volume{Name: "v", VolumeSource: tc.src}); got != tc.want {
			t.Errorf("CanSupport(%+v) = %v", tc.src, got)
		}
	}
	if p.Name() != "kubernetes.io~csi" {
		t.Errorf("name %q", p.Name())
	}
}

// A generic ephemeral volume uses the PVC <pod>-<volume>, only when the pod
// owns it.
func TestVolumePluginGenericEphemeral(t *testing.T) {
	drv := newCSIDriver()
	pod := testPod("uid-1", v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}})
	pvc := boundPVC(pod.Name+"-scratch", "pv-1")
	e := newEnv(t, drv, pvc, csiPV("pv-1", "vol-1", pvc), noAttach())
	_, err := e.setUp(t, pod, "scratch")
	mustContain(t, err, "pod is not owner")
	wantCalls(t, drv)

	pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
	if _, err := e.client.CoreV1().PersistentVolumeClaims(testNS).Update(context.Background(), pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	target := e.mustSetUp(t, pod, "scratch")
	if want := PublishPath(e.root, "uid-1", "pv-1"); target != want {
		t.Errorf("target %s, want %s", target, want)
	}
	wantCalls(t, drv, "NodePublishVolume")
	if in := e.p.InUse(); len(in) != 1 {
		t.Errorf("in use %v", in)
	}
}

func TestNewVolumePlugin(t *testing.T) {
	client := fake.NewClientset()
	ctortest.Run(t, NewVolumePlugin, []ctortest.Case[VolumePluginConfig]{
		{Name: "no root dir", Config: VolumePluginConfig{NodeName: testNode, Drivers: &Drivers{}}, WantErr: "VolumePluginConfig.RootDir is required"},
		{Name: "no node name", Config: VolumePluginConfig{RootDir: "/var/lib/kubelet", Drivers: &Drivers{}}, WantErr: "VolumePluginConfig.NodeName is required"},
		{Name: "no drivers", Config: VolumePluginConfig{RootDir: "/var/lib/kubelet", NodeName: testNode}, WantErr: "VolumePluginConfig.Drivers is required"},
		{Name: "defaults", Config: VolumePluginConfig{RootDir: "/var/lib/kubelet", NodeName: testNode, Drivers: &Drivers{}, Client: client}},
	}, func(t *testing.T, p *VolumePlugin) {
		ctortest.RealClock(t, p.cfg.Clock)
		if p.cfg.Timeout != callTimeout || p.cfg.StatsPeriod != time.Minute {
			t.Errorf("timeout %v, stats period %v", p.cfg.Timeout, p.cfg.StatsPeriod)
		}
		if o, ok := p.cfg.Objects.(clientObjects); !ok || o.c != client {
			t.Errorf("objects %#v, want the client's", p.cfg.Objects)
		}
		if p.cfg.Secrets == nil {
			t.Error("no secrets reader with a client")
		}
	})
	// Standalone: nothing read through the API.
	p, err := NewVolumePlugin(VolumePluginConfig{RootDir: "/var/lib/kubelet", NodeName: testNode, Drivers: &Drivers{}})
	if err != nil {
		t.Fatal(err)
	}
	if p.cfg.Objects != nil || p.cfg.Secrets != nil {
		t.Errorf("standalone plugin with objects %v or secrets", p.cfg.Objects)
	}
}
