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

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

const draTestDriver = "test-driver.cdi.k8s.io"

// startDRATestDriver runs upstream's DRA test driver's kubelet plugin for
// node n as a host process (hack/cluster/build.sh builds it): it publishes
// the node's ResourceSlice (num devices), registers through n's
// plugins_registry and writes its CDI specs to cdiDir.
func startDRATestDriver(t *testing.T, c *framework.Cluster, n *framework.Nodelet, cdiDir string, num int) *lockedBuffer {
	t.Helper()
	bin := filepath.Join(c.K8sBin, "dra-test-driver")
	if _, err := os.Stat(bin); err != nil {
		if framework.InCI() {
			t.Fatalf("%s is missing: hack/cluster/build.sh builds it", bin)
		}
		t.Skipf("%s is not built (make cluster-up builds it)", bin)
	}
	// Its socket's folder, as a DaemonSet's hostPath (DirectoryOrCreate)
	// gives it.
	if err := os.MkdirAll(filepath.Join(n.RootDir, "plugins", draTestDriver), 0o750); err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{}
	cmd := exec.Command(bin, "--kubeconfig", filepath.Join(c.PKI, "admin.kubeconfig"), "-v", "5", "kubelet-plugin",
		"--node-name", n.NodeName, "--num-devices", framework.Itoa(num), "--cdi-dir", cdiDir,
		"--plugin-registration-path", filepath.Join(n.RootDir, "plugins_registry"), "--datadir", filepath.Join(n.RootDir, "plugins"))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("DRA test driver's log:\n%s", out.String())
		}
		// Its slices, if the node is not deleted yet.
		_ = c.Client.ResourceV1().ResourceSlices().DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.NodeName})
	})
	return out
}

// draPod is a busybox pod on node (through the scheduler, which allocates
// its claim) whose container uses the pod's claim "gpu", the ResourceClaim
// claim ("": set by the caller).
func draPod(name, node, claim string) *v1.Pod {
	p := busyboxPod(name, "", "sleep 3600")
	p.Spec.NodeSelector = map[string]string{v1.LabelHostname: node}
	p.Spec.TerminationGracePeriodSeconds = new(int64)
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	return p
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// draCalls is how many times the node called driver's method (its
// dra_grpc_operations_duration_seconds count).
func draCalls(fams map[string]*dto.MetricFamily, method string) uint64 {
	var n uint64
	for _, m := range fams["dra_grpc_operations_duration_seconds"].GetMetric() {
		if matches(m, map[string]string{"driver_name": draTestDriver}) && strings.HasSuffix(labelValue(m, "method_name"), method) {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// cdiSpecsOf are the CDI spec files in dir that name the claim's UID.
func cdiSpecsOf(t *testing.T, dir string, uid string) []string {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && strings.Contains(string(b), uid) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestClusterDRA: a ResourceClaim through a real DRA driver (upstream's
// test driver, its kubelet plugin as a host process) on containerd v2
// with CDI: the driver registers through plugins_registry; two pods
// sharing the claim run with the device the driver's CDI spec describes
// (its environment); the claim is prepared once (one NodePrepareResources
// call) and unprepared once, after its last pod on the node is gone; a pod
// that completes is Succeeded in the API only once its claim is
// unprepared.
func TestClusterDRA(t *testing.T) {
	name := "e2e-dra"
	c := framework.RequireCluster(t)
	rs := framework.StartContainerd2(t, c.Stack)
	cc := *c
	cc.Stack = rs
	n := framework.NewClusterNodelet(t, &cc, name)
	n.Start()
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		return c.NodeReady(t, name) == v1.ConditionTrue
	}, "node %s Ready", name)
	ctx := context.Background()

	startDRATestDriver(t, c, n, rs.CDISpecDir, 2)
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		slices, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		return err == nil && len(slices.Items) == 1 && len(slices.Items[0].Spec.Devices) == 2
	}, "the driver's ResourceSlice of the node")
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		return strings.Contains(n.Log(), `"Registered DRA plugin"`)
	}, "nodelet registering the driver's plugin")

	class := "e2e-dra-" + time.Now().Format("150405")
	if _, err := c.Client.ResourceV1().DeviceClasses().Create(ctx, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "` + draTestDriver + `"`}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.ResourceV1().DeviceClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	ns := c.Namespace(t, "dra")
	claim, err := c.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "my-device", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class}}},
			Config: []resourceapi.DeviceClaimConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver: draTestDriver, Parameters: runtime.RawExtension{Raw: []byte(`{"a":"b"}`)}}}}},
		}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	for _, pn := range []string{"one", "two"} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, draPod(pn, name, "gpu"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pn := range []string{"one", "two"} {
		waitPod(t, c, ns, pn, 90*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	}
	ctr := rs.RunningContainer(t, "one", "c")
	if ctr == nil {
		t.Fatal("pod one's container not found in the runtime")
	}
	out, _, err := rs.Runtime.ExecSync(ctx, ctr.Id, []string{"sh", "-c", "echo $user_a $claim_gpu_my_device"}, 10*time.Second)
	if err != nil || strings.TrimSpace(string(out)) != "b true" {
		t.Errorf("pod one's environment from the claim's CDI device: %q %v, want \"b true\"", out, err)
	}
	if specs := cdiSpecsOf(t, rs.CDISpecDir, string(claim.UID)); len(specs) != 1 {
		t.Errorf("CDI specs of the claim: %v, want one", specs)
	}
	// The pod-resources API names the claim and the driver's device.
	conn, err := grpc.NewClient("unix://"+filepath.Join(n.RootDir, "pod-resources", "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pr, err := podresourcesv1.NewPodResourcesListerClient(conn).Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodName: "one", PodNamespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if cs := pr.GetPodResources().GetContainers(); len(cs) != 1 || len(cs[0].DynamicResources) != 1 || cs[0].DynamicResources[0].ClaimName != "gpu" ||
		len(cs[0].DynamicResources[0].ClaimResources) != 1 || cs[0].DynamicResources[0].ClaimResources[0].DriverName != draTestDriver ||
		len(cs[0].DynamicResources[0].ClaimResources[0].CdiDevices) != 1 {
		t.Errorf("pod-resources' view of pod one: %v", pr.GetPodResources())
	}
	fams := kubeletMetrics(t, c, n)
	if got := draCalls(fams, ".v1.DRAPlugin/NodePrepareResources"); got != 1 {
		t.Errorf("NodePrepareResources calls %d, want 1 for a claim shared by two pods", got)
		for name, f := range fams {
			if strings.HasPrefix(name, "dra_") {
				t.Logf("%s: %v", name, f.GetMetric())
			}
		}
	}

	// The first pod gone, the claim stays prepared for the second.
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "one", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, "one", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, "pod one deleted")
	if got := draCalls(kubeletMetrics(t, c, n), ".v1.DRAPlugin/NodeUnprepareResources"); got != 0 {
		t.Errorf("NodeUnprepareResources calls %d while pod two uses the claim", got)
	}
	if specs := cdiSpecsOf(t, rs.CDISpecDir, string(claim.UID)); len(specs) != 1 {
		t.Errorf("CDI specs of the claim with pod two running: %v, want one", specs)
	}

	// The last pod gone: unprepared once, its CDI spec removed.
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "two", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		return draCalls(kubeletMetrics(t, c, n), ".v1.DRAPlugin/NodeUnprepareResources") == 1 && len(cdiSpecsOf(t, rs.CDISpecDir, string(claim.UID))) == 0
	}, "the claim unprepared after its last pod")
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		cl, err := c.Client.ResourceV1().ResourceClaims(ns).Get(ctx, "gpu", metav1.GetOptions{})
		return err == nil && len(cl.Status.ReservedFor) == 0
	}, "the claim no longer reserved")

	// A pod that completes, its claim from a template: its Succeeded
	// phase reaches the API only once its claim is unprepared (as
	// upstream: else the claim could be deallocated and handed to another
	// pod while still prepared here).
	if _, err := c.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "one-gpu"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "my-device", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class}}}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	once := draPod("once", name, "")
	once.Spec.ResourceClaims[0] = v1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}
	once.Spec.RestartPolicy = v1.RestartPolicyNever
	once.Spec.Containers[0].Command = []string{"sh", "-c", "sleep 3"}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, once, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := waitPod(t, c, ns, "once", 90*time.Second, "Running", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning && len(p.Status.ResourceClaimStatuses) == 1 && p.Status.ResourceClaimStatuses[0].ResourceClaimName != nil
	})
	generated, err := c.Client.ResourceV1().ResourceClaims(ns).Get(ctx, *running.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if specs := cdiSpecsOf(t, rs.CDISpecDir, string(generated.UID)); len(specs) != 1 {
		t.Errorf("CDI specs of the template's claim while the pod runs: %v", specs)
	}
	waitPod(t, c, ns, "once", 60*time.Second, "Succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	if specs := cdiSpecsOf(t, rs.CDISpecDir, string(generated.UID)); len(specs) != 0 {
		t.Errorf("the pod was Succeeded in the API while its claim was still prepared (CDI specs %v)", specs)
	}
}
