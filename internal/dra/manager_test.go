package dra

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/dra/state"
)

// countingDriver prepares every claim with one device per request name
// given at construction and counts its calls.
type countingDriver struct {
	drapbv1.UnimplementedDRAPluginServer
	prepares, unprepares atomic.Int32
	fail                 string
	// hold, when set, blocks NodePrepareResources until closed; called
	// is told of each call first.
	hold, called chan struct{}
}

func (d *countingDriver) NodePrepareResources(_ context.Context, req *drapbv1.NodePrepareResourcesRequest) (*drapbv1.NodePrepareResourcesResponse, error) {
	d.prepares.Add(1)
	if d.hold != nil {
		d.called <- struct{}{}
		<-d.hold
	}
	out := &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{}}
	for _, c := range req.Claims {
		if d.fail != "" {
			out.Claims[c.Uid] = &drapbv1.NodePrepareResourceResponse{Error: d.fail}
			continue
		}
		out.Claims[c.Uid] = &drapbv1.NodePrepareResourceResponse{Devices: []*drapbv1.Device{
			{RequestNames: []string{"gpu"}, PoolName: "node", DeviceName: "gpu-0", CdiDeviceIds: []string{"gpu.example.com/gpu=gpu-0"}},
			{RequestNames: []string{"nic"}, PoolName: "node", DeviceName: "nic-0", CdiDeviceIds: []string{"gpu.example.com/nic=nic-0"}}}}
	}
	return out, nil
}

func (d *countingDriver) NodeUnprepareResources(_ context.Context, req *drapbv1.NodeUnprepareResourcesRequest) (*drapbv1.NodeUnprepareResourcesResponse, error) {
	d.unprepares.Add(1)
	out := &drapbv1.NodeUnprepareResourcesResponse{Claims: map[string]*drapbv1.NodeUnprepareResourceResponse{}}
	for _, c := range req.Claims {
		out.Claims[c.Uid] = &drapbv1.NodeUnprepareResourceResponse{}
	}
	return out, nil
}

const driverName = "gpu.example.com"

func claimFor(name string, reservedFor ...*v1.Pod) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: driverName, Pool: "node", Device: "gpu-0"}, {Request: "nic", Driver: driverName, Pool: "node", Device: "nic-0"}}}}
	for _, p := range reservedFor {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
	return c
}

func claimPod(name, claim string, requests ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("pod-" + name)}}
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "dev", ResourceClaimName: ptr.To(claim)}}
	c := v1.Container{Name: "c"}
	for _, r := range requests {
		c.Resources.Claims = append(c.Resources.Claims, v1.ResourceClaim{Name: "dev", Request: r})
	}
	p.Spec.Containers = []v1.Container{c}
	return p
}

type draEnv struct {
	m       *Manager
	driver  *countingDriver
	client  *fake.Clientset
	plugins *Plugins
	dir     string
	active  []*v1.Pod
}

func newDRAEnv(t *testing.T, objects ...*resourceapi.ResourceClaim) *draEnv {
	t.Helper()
	e := &draEnv{driver: &countingDriver{}, client: fake.NewClientset(), dir: t.TempDir()}
	for _, o := range objects {
		if _, err := e.client.ResourceV1().ResourceClaims(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if e.plugins, err = NewPlugins(PluginsConfig{}); err != nil {
		t.Fatal(err)
	}
	sock, _ := serve(t, t.TempDir(), "dra.sock", func(s *grpc.Server) { drapbv1.RegisterDRAPluginServer(s, e.driver) })
	if err := e.plugins.RegisterPlugin(context.Background(), driverName, sock, []string{drapbv1.DRAPluginService}); err != nil {
		t.Fatal(err)
	}
	e.m = e.newManager(t)
	return e
}

func (e *draEnv) newManager(t *testing.T) *Manager {
	t.Helper()
	m, err := New(Config{Client: e.client, Dir: e.dir, Plugins: e.plugins, ActivePods: func() []*v1.Pod { return e.active },
		SourcesReady: func() bool { return true }, Clock: testingclock.NewFakeClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (e *draEnv) checkpoint(t *testing.T) state.ClaimInfoStateList {
	t.Helper()
	blob, err := os.ReadFile(filepath.Join(e.dir, state.FileName))
	if err != nil {
		t.Fatal(err)
	}
	list, err := state.Parse(blob)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// TestPrepareRefusals: a claim not allocated, not reserved for the pod, or
// of a driver not registered fails the pod's preparation naming why, and
// leaves nothing to unprepare.
func TestPrepareRefusals(t *testing.T) {
	a, b := claimPod("a", "not-allocated"), claimPod("b", "not-reserved")
	notAllocated := claimFor("not-allocated", a)
	notAllocated.Status.Allocation = nil
	otherDriver := claimFor("other-driver", claimPod("c", "other-driver"))
	otherDriver.Status.Allocation.Devices.Results[0].Driver = "other.example.com"
	e := newDRAEnv(t, notAllocated, claimFor("not-reserved"), otherDriver)
	for p, want := range map[*v1.Pod]string{
		a:                              "prepare dynamic resources: ResourceClaim not-allocated: not allocated",
		b:                              "pod b (pod-b) is not allowed to use ResourceClaim not-reserved (uid-not-reserved)",
		claimPod("c", "other-driver"):  "DRA driver other.example.com is not registered",
		claimPod("d", "no-such-claim"): `fetch ResourceClaim no-such-claim: resourceclaims.resource.k8s.io "no-such-claim" not found`,
	} {
		if err := e.m.PrepareResources(context.Background(), p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", p.Name, err, want)
		}
		if e.m.PodMightNeedToUnprepareResources(p.UID) {
			t.Errorf("%s: refused, yet something to unprepare", p.Name)
		}
	}
	if n := e.driver.prepares.Load(); n != 0 {
		t.Errorf("%d prepare calls for refused pods", n)
	}
	if list := e.checkpoint(t); len(list) != 0 {
		t.Errorf("checkpoint after refusals: %+v", list)
	}
}

// TestPrepareShareUnprepare: a claim is prepared once for the pods that
// share it, a container gets the CDI devices of the requests it names, a
// restart keeps the claim (checkpoint), and the claim is unprepared once
// its last pod is gone (by UnprepareResources, or the reconcile loop for
// a pod no longer active).
func TestPrepareShareUnprepare(t *testing.T) {
	a, b := claimPod("a", "shared", "gpu"), claimPod("b", "shared")
	e := newDRAEnv(t, claimFor("shared", a, b))
	ctx := context.Background()
	for _, p := range []*v1.Pod{a, b} {
		if err := e.m.PrepareResources(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.driver.prepares.Load(); n != 1 {
		t.Errorf("%d NodePrepareResources calls for one claim shared by two pods, want 1", n)
	}
	if got, err := e.m.ContainerCDIDevices(a, &a.Spec.Containers[0]); err != nil || strings.Join(got, ",") != "gpu.example.com/gpu=gpu-0" {
		t.Errorf("pod a's container (request gpu): %v %v", got, err)
	}
	bAll := claimPod("b", "shared", "")
	if got, err := e.m.ContainerCDIDevices(b, &bAll.Spec.Containers[0]); err != nil || len(got) != 2 {
		t.Errorf("a container naming the whole claim: %v %v", got, err)
	}
	if got, _ := e.m.ContainerCDIDevices(b, &b.Spec.Containers[0]); len(got) != 0 {
		t.Errorf("a container naming no claim: %v", got)
	}
	list := e.checkpoint(t)
	if len(list) != 1 || list[0].PodUIDs.Len() != 2 || len(list[0].DriverState[driverName].Devices) != 2 {
		t.Fatalf("checkpoint: %+v", list)
	}

	// A restart: the claim is known again (its pods too).
	e.m = e.newManager(t)
	if !e.m.PodMightNeedToUnprepareResources(a.UID) {
		t.Error("after a restart, pod a's claim is forgotten")
	}
	if err := e.m.UnprepareResources(ctx, a); err != nil {
		t.Fatal(err)
	}
	if n := e.driver.unprepares.Load(); n != 0 {
		t.Errorf("unprepared while pod b still uses the claim (%d calls)", n)
	}
	// Pod b is not active any more: the reconcile loop unprepares.
	e.active = nil
	e.m.Reconcile(ctx)
	if n := e.driver.unprepares.Load(); n != 1 {
		t.Errorf("%d NodeUnprepareResources calls after the last pod, want 1", n)
	}
	if list := e.checkpoint(t); len(list) != 0 || e.m.PodMightNeedToUnprepareResources(b.UID) {
		t.Errorf("checkpoint after the last pod: %+v", list)
	}
	if err := e.m.UnprepareResources(ctx, b); err != nil || e.driver.unprepares.Load() != 1 {
		t.Errorf("a second unprepare: %v, %d calls", err, e.driver.unprepares.Load())
	}
}

// TestPrepareDriverError: a driver's per-claim error fails the pod with
// it; the pod is referenced (so it gets unprepared) and a retry prepares.
func TestPrepareDriverError(t *testing.T) {
	a := claimPod("a", "c1", "gpu")
	e := newDRAEnv(t, claimFor("c1", a))
	e.driver.fail = "device busy"
	ctx := context.Background()
	if err := e.m.PrepareResources(ctx, a); err == nil || !strings.Contains(err.Error(), "NodePrepareResources failed for ResourceClaim c1: device busy") {
		t.Fatalf("driver error: %v", err)
	}
	if !e.m.PodMightNeedToUnprepareResources(a.UID) {
		t.Error("a pod whose preparation reached the driver is not to be unprepared")
	}
	e.driver.fail = ""
	if err := e.m.PrepareResources(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.m.ContainerCDIDevices(a, &a.Spec.Containers[0]); len(got) != 1 {
		t.Errorf("after the retry: %v", got)
	}
}

// TestExtendedResourceClaim: a container asking a DRA-backed extended
// resource gets the devices of the request the scheduler mapped it to.
func TestExtendedResourceClaim(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns", UID: "pod-x"}}
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{"example.com/gpu": resource.MustParse("1")}}}}
	p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "x-extended",
		RequestMappings: []v1.ContainerExtendedResourceRequest{{ContainerName: "c", ResourceName: "example.com/gpu", RequestName: "nic"}}}
	if !NeedsPreparation(p) {
		t.Fatal("a pod with an extended resource claim needs no preparation")
	}
	e := newDRAEnv(t, claimFor("x-extended", p))
	if err := e.m.PrepareResources(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if got, err := e.m.ContainerCDIDevices(p, &p.Spec.Containers[0]); err != nil || strings.Join(got, ",") != "gpu.example.com/nic=nic-0" {
		t.Errorf("extended resource devices: %v %v", got, err)
	}
}

// TestPrepareConcurrentPods: two pods sharing a claim prepared at the same
// time: the second waits for the first's preparation instead of calling
// the driver again (upstream calls it once per pod then).
func TestPrepareConcurrentPods(t *testing.T) {
	a, b := claimPod("a", "shared", "gpu"), claimPod("b", "shared", "gpu")
	e := newDRAEnv(t, claimFor("shared", a, b))
	e.driver.hold, e.driver.called = make(chan struct{}), make(chan struct{}, 2)
	waiting := make(chan struct{}, 1)
	e.m.waiting = func() { waiting <- struct{}{} }
	ctx := context.Background()
	errs := make(chan error, 2)
	go func() { errs <- e.m.PrepareResources(ctx, a) }()
	<-e.driver.called // a is in the driver
	go func() { errs <- e.m.PrepareResources(ctx, b) }()
	select {
	case <-waiting:
	case <-e.driver.called:
		t.Fatal("the driver was called again for a claim being prepared")
	case <-time.After(10 * time.Second):
		t.Fatal("pod b neither waited nor called the driver")
	}
	close(e.driver.hold)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := e.driver.prepares.Load(); n != 1 {
		t.Errorf("%d NodePrepareResources calls, want 1", n)
	}
	for _, p := range []*v1.Pod{a, b} {
		if got, err := e.m.ContainerCDIDevices(p, &p.Spec.Containers[0]); err != nil || len(got) != 1 {
			t.Errorf("pod %s's CDI devices %v %v", p.Name, got, err)
		}
	}
}

// TestPodWithoutClaims: most pods have no claims: preparing and
// unpreparing them calls no driver and writes no checkpoint.
func TestPodWithoutClaims(t *testing.T) {
	e := newDRAEnv(t)
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "ns", UID: "pod-plain"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	path := filepath.Join(e.dir, state.FileName)
	before, beforeErr := os.Stat(path)
	ctx := context.Background()
	if err := e.m.PrepareResources(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := e.m.UnprepareResources(ctx, p); err != nil {
		t.Fatal(err)
	}
	after, afterErr := os.Stat(path)
	if (beforeErr == nil) != (afterErr == nil) || (afterErr == nil && !after.ModTime().Equal(before.ModTime())) {
		t.Errorf("the checkpoint was written for a pod without claims")
	}
	if e.driver.prepares.Load()+e.driver.unprepares.Load() != 0 {
		t.Errorf("the driver was called for a pod without claims")
	}
}

// TestUnprepareWhilePreparing: a claim a driver is preparing is not
// unprepared at the same time (the pod's stop or the reconcile loop
// retries); once prepared, it is.
func TestUnprepareWhilePreparing(t *testing.T) {
	a := claimPod("a", "gpu", "gpu")
	e := newDRAEnv(t, claimFor("gpu", a))
	e.driver.hold, e.driver.called = make(chan struct{}), make(chan struct{}, 1)
	ctx := context.Background()
	errs := make(chan error, 1)
	go func() { errs <- e.m.PrepareResources(ctx, a) }()
	<-e.driver.called
	if err := e.m.UnprepareResources(ctx, a); err == nil || !strings.Contains(err.Error(), "ResourceClaim gpu is being prepared") {
		t.Fatalf("unprepare during the prepare: %v", err)
	}
	e.m.Reconcile(ctx) // pod a is not active: still not unprepared
	close(e.driver.hold)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if n := e.driver.unprepares.Load(); n != 0 {
		t.Fatalf("%d NodeUnprepareResources calls during the prepare", n)
	}
	if got, err := e.m.ContainerCDIDevices(a, &a.Spec.Containers[0]); err != nil || len(got) != 1 {
		t.Fatalf("CDI devices after the prepare: %v %v", got, err)
	}
	if err := e.m.UnprepareResources(ctx, a); err != nil || e.driver.unprepares.Load() != 1 {
		t.Fatalf("unprepare after the prepare: %v, %d calls", err, e.driver.unprepares.Load())
	}
}
