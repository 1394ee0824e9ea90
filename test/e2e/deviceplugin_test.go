package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	nodeagent "github.com/nodelet/nodelet/test/agent"
	"github.com/nodelet/nodelet/test/e2e/framework"
)

const sampleResource = "example.com/resource"

// startSamplePlugin runs test/fakes/deviceplugin for the node until the test
// ends.
func startSamplePlugin(t *testing.T, n *framework.Nodelet, devDir string, args ...string) *nodeagent.DevicePlugin {
	t.Helper()
	bin, err := framework.BuildTool("./test/fakes/deviceplugin")
	if err != nil {
		t.Fatal(err)
	}
	p, err := nodeagent.StartDevicePlugin(bin, filepath.Join(n.RootDir, "device-plugins"), devDir, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("device plugin log:\n%s", p.Log())
		}
	})
	return p
}

// deviceCounts are the node's capacity and allocatable of the resource.
func deviceCounts(t *testing.T, c *framework.Cluster, node string) (int64, int64) {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		return -1, -1
	}
	cq, ok := n.Status.Capacity[sampleResource]
	if !ok {
		return -1, -1
	}
	aq := n.Status.Allocatable[sampleResource]
	return cq.Value(), aq.Value()
}

func waitDevices(t *testing.T, c *framework.Cluster, node string, capacity, alloc int64, what string) time.Duration {
	t.Helper()
	start := time.Now()
	framework.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		cq, aq := deviceCounts(t, c, node)
		return cq == capacity && aq == alloc
	}, "%s: node capacity/allocatable %d/%d", what, capacity, alloc)
	return time.Since(start)
}

func devicePod(name, node string, n int64, initN int64) *v1.Pod {
	p := busyboxPod(name, node, "echo devices=$FAKE_DEVICES; sleep 3600")
	q := *resource.NewQuantity(n, resource.DecimalSI)
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{Limits: v1.ResourceList{sampleResource: q}, Requests: v1.ResourceList{sampleResource: q}}
	if initN > 0 {
		iq := *resource.NewQuantity(initN, resource.DecimalSI)
		p.Spec.InitContainers = []v1.Container{{Name: "init", Image: busybox, Command: []string{"sh", "-c", "cat /fake/*"},
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{sampleResource: iq}, Requests: v1.ResourceList{sampleResource: iq}}}}
	}
	return p
}

// podDevices are the device IDs the pod-resources API gives each running
// pod's container, as "pod/container" -> IDs, and the allocatable IDs.
func podDevices(t *testing.T, n *framework.Nodelet) (map[string][]string, []string) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(n.RootDir, "pod-resources", "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := podresourcesv1.NewPodResourcesListerClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := cl.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	out := map[string][]string{}
	for _, p := range l.PodResources {
		for _, ctr := range p.Containers {
			for _, d := range ctr.Devices {
				if d.ResourceName == sampleResource {
					out[p.Name+"/"+ctr.Name] = append(out[p.Name+"/"+ctr.Name], d.DeviceIds...)
				}
			}
		}
	}
	a, err := cl.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil {
		t.Fatalf("GetAllocatableResources: %v", err)
	}
	var alloc []string
	for _, d := range a.Devices {
		if d.ResourceName == sampleResource {
			alloc = append(alloc, d.DeviceIds...)
		}
	}
	slices.Sort(alloc)
	return out, alloc
}

// TestDevicePlugins runs the sample device plugin (test/fakes/deviceplugin,
// the real deviceplugin v1beta1 API) against a node, as upstream's
// test/e2e_node/device_plugin_test.go: its two devices become the node's
// capacity and allocatable; a pod asking for one gets the plugin's
// preferred device with its mount, device node, env and annotation, after
// PreStartContainer; an init container's device is reused by the app
// container after it; a pod asking for more than is left is refused
// (UnexpectedAdmissionError, as upstream); the pod-resources API lists the
// assignments. After a nodelet restart the pods keep their containers and
// devices (the checkpoint) and the plugin registers again; an unhealthy
// device leaves allocatable and shows in its container's
// allocatedResourcesStatus; the plugin gone, allocatable is 0, and when it
// is back its devices are too.
func TestDevicePlugins(t *testing.T) {
	name := "e2e-devices"
	c, n := clusterNode(t, name, "")
	devDir := t.TempDir()
	start := time.Now()
	plugin := startSamplePlugin(t, n, devDir, "-prestart", "-prefer")
	waitDevices(t, c, name, 2, 2, "plugin registered")
	t.Logf("plugin start -> node allocatable 2: %v", time.Since(start).Round(time.Millisecond))

	ns := c.Namespace(t, "devices")
	ctx := context.Background()
	createPods(t, c, ns, devicePod("one", name, 1, 0))
	waitPod(t, c, ns, "one", 90*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	ctr := c.RunningContainer(t, "one", "c")
	if ctr == nil {
		t.Fatal("pod one's container not running")
	}
	// The plugin prefers the highest ID.
	if got := execIn(t, c, ctr.Id, "sh", "-c", "echo $FAKE_DEVICES; cat /fake/Dev-2; test -c /dev/fake-Dev-2 && echo chardev; echo x > /dev/fake-Dev-2 && echo writable"); got != "Dev-2\nDev-2\nchardev\nwritable" {
		t.Errorf("pod one sees %q", got)
	}
	if st := c.ContainerStatus(t, ctr.Id); st.Annotations["example.com/devices"] != "Dev-2" {
		t.Errorf("container annotations %v", st.Annotations)
	}
	if b, _ := os.ReadFile(filepath.Join(devDir, "prestart.log")); strings.TrimSpace(string(b)) != "Dev-2" {
		t.Errorf("PreStartContainer calls %q", b)
	}

	// The init container's device goes to the app container after it.
	createPods(t, c, ns, devicePod("two", name, 1, 1))
	waitPod(t, c, ns, "two", 90*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	got, alloc := podDevices(t, n)
	want := map[string][]string{"one/c": {"Dev-2"}, "two/c": {"Dev-1"}}
	if len(got) != 2 || !slices.Equal(got["one/c"], want["one/c"]) || !slices.Equal(got["two/c"], want["two/c"]) {
		t.Errorf("pod-resources List: %v, want %v", got, want)
	}
	if !slices.Equal(alloc, []string{"Dev-1", "Dev-2"}) {
		t.Errorf("pod-resources allocatable %v", alloc)
	}
	createPods(t, c, ns, devicePod("three", name, 1, 0))
	p := waitPod(t, c, ns, "three", 30*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "UnexpectedAdmissionError" || p.Status.Message != "Pod was rejected: Allocate failed due to requested number of devices unavailable for example.com/resource. Requested: 1, Available: 0, which is unexpected" {
		t.Errorf("pod three: %s: %s", p.Status.Reason, p.Status.Message)
	}

	// A nodelet restart: the containers and their devices stay, the plugin
	// registers again (its socket was cleared).
	idOne, idTwo := ctr.Id, c.RunningContainer(t, "two", "c").Id
	n.Stop()
	restart := time.Now()
	n.Start()
	framework.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		return strings.Count(plugin.Log(), "registered "+sampleResource) == 2
	}, "the plugin registered again")
	waitDevices(t, c, name, 2, 2, "plugin registered again")
	t.Logf("nodelet restart -> node allocatable 2 again: %v", time.Since(restart).Round(time.Millisecond))
	if cur := c.RunningContainer(t, "one", "c"); cur == nil || cur.Id != idOne {
		t.Errorf("pod one's container was replaced: %v", cur)
	}
	if cur := c.RunningContainer(t, "two", "c"); cur == nil || cur.Id != idTwo {
		t.Errorf("pod two's container was replaced: %v", cur)
	}
	var after map[string][]string
	framework.Eventually(t, 30*time.Second, 100*time.Millisecond, func() bool {
		after, _ = podDevices(t, n)
		return len(after) == 2
	}, "the pods in the pod-resources API again")
	if !slices.Equal(after["one/c"], []string{"Dev-2"}) || !slices.Equal(after["two/c"], []string{"Dev-1"}) {
		t.Errorf("after restart pod-resources List: %v", after)
	}
	// Pod two's device is free once it is gone.
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "two", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, "two", metav1.GetOptions{})
		return err != nil
	}, "pod two gone")
	createPods(t, c, ns, devicePod("four", name, 1, 0))
	waitPod(t, c, ns, "four", 90*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if got, _ := podDevices(t, n); !slices.Equal(got["four/c"], []string{"Dev-1"}) {
		t.Errorf("pod four's devices: %v", got)
	}

	// The container's allocatedResourcesStatus (ResourceHealthStatus, on
	// by default as upstream's) follows its device's health.
	deviceHealth := func(want v1.ResourceHealthStatus) {
		t.Helper()
		waitPod(t, c, ns, "four", 30*time.Second, "allocatedResourcesStatus Dev-1 "+string(want), func(p *v1.Pod) bool {
			cs := p.Status.ContainerStatuses
			return len(cs) == 1 && len(cs[0].AllocatedResourcesStatus) == 1 && cs[0].AllocatedResourcesStatus[0].Name == sampleResource &&
				len(cs[0].AllocatedResourcesStatus[0].Resources) == 1 && cs[0].AllocatedResourcesStatus[0].Resources[0].ResourceID == "Dev-1" &&
				cs[0].AllocatedResourcesStatus[0].Resources[0].Health == want
		})
	}
	deviceHealth(v1.ResourceHealthStatusHealthy)

	// An unhealthy device leaves allocatable, not capacity.
	if err := plugin.SetHealthy("Dev-1", false); err != nil {
		t.Fatal(err)
	}
	waitDevices(t, c, name, 2, 1, "Dev-1 unhealthy")
	deviceHealth(v1.ResourceHealthStatusUnhealthy)
	if _, alloc := podDevices(t, n); !slices.Equal(alloc, []string{"Dev-2"}) {
		t.Errorf("pod-resources allocatable with Dev-1 unhealthy: %v", alloc)
	}
	// The plugin gone: nothing allocatable; back: its devices are.
	plugin.Stop()
	waitDevices(t, c, name, 2, 0, "plugin gone")
	plugin = startSamplePlugin(t, n, devDir)
	waitDevices(t, c, name, 2, 1, "plugin back")
	if err := plugin.SetHealthy("Dev-1", true); err != nil {
		t.Fatal(err)
	}
	waitDevices(t, c, name, 2, 2, "Dev-1 healthy again")
	if cur := c.RunningContainer(t, "one", "c"); cur == nil || cur.Id != idOne {
		t.Errorf("pod one's container did not survive: %v", cur)
	}
}

// TestDevicePluginCDI: with a runtime that resolves CDI names (containerd
// v2, CDI enabled), the CDI device names the plugin's Allocate gives reach
// the container through CRI's CDIDevices: the sample plugin's CDI spec
// sets an env variable per device, which the container has. Standalone
// mode: a static pod asking for the device.
func TestDevicePluginCDI(t *testing.T) {
	s := framework.StartContainerd2(t, framework.RequireStack(t))
	n := framework.NewNodelet(t, s, "e2e-cdi")
	n.Start()
	devDir := t.TempDir()
	// After nodelet cleared its device plugins folder (at its start).
	framework.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		_, err := os.Stat(filepath.Join(n.RootDir, "device-plugins", "kubelet.sock"))
		return err == nil
	}, "nodelet serving device plugin registration")
	plugin := startSamplePlugin(t, n, devDir, "-cdi-dir", s.CDISpecDir)
	// Registered first: a pod admitted before its plugin is known runs
	// without the device, as upstream's (the resource is not the node's).
	framework.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		if !strings.Contains(plugin.Log(), "registered "+sampleResource) {
			return false
		}
		_, alloc := podDevices(t, n)
		return len(alloc) == 2
	}, "the plugin registered, its devices known")
	n.WriteManifest("cdi.yaml", podManifest("cdi", "", `  - name: c
    image: `+busybox+`
    command: ["sh", "-c", "sleep 3600"]
    resources:
      limits: {example.com/resource: 1}
`))
	ctr := waitRunning(t, s, n.PodName("cdi"), "c", 90*time.Second)
	out, _, err := s.Runtime.ExecSync(context.Background(), ctr.Id, []string{"sh", "-c", "echo $FAKE_DEVICES $CDI_DEVICE_Dev_1"}, 10*time.Second)
	if err != nil || strings.TrimSpace(string(out)) != "Dev-1 1" {
		t.Fatalf("the container's env: %q %v (want the plugin's FAKE_DEVICES and the CDI spec's CDI_DEVICE_Dev_1)", out, err)
	}
}
