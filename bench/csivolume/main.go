// Command csivolume measures pods with a CSI persistent volume side by
// side: nodelet and the upstream kubelet, in turn, run as node
// bench-csivol with the same KubeletConfiguration and the project's
// host-path driver (test/fakes/hostpathcsi, ext4 images on loop devices,
// STAGE_UNSTAGE_VOLUME, a CSIDriver with attachRequired false). Per run: a
// fresh volume, a PV pre-bound to a PVC (bound before the clock starts),
// then seconds from the pod's creation to Running (stage, publish,
// sandbox, container) and from its deletion (grace 1 s) to its removal
// from the API (kill, unpublish, unstage). It writes the runs as JSON and a
// Markdown section.
//
//	go run ./bench/csivolume -doc docs/benchmarks.md
//
// Run as root from the repository root with the stack and the control plane
// up (hack/bench.sh does both).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"path/filepath"
	"sort"
	"strings"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/bench/internal/benchkit"
	nodeagent "github.com/nodelet/nodelet/test/agent"
	"github.com/nodelet/nodelet/test/e2e/framework"
)

const (
	driverName = "hostpath.csi.nodelet.dev"
	namespace  = "bench-csivol"
)

// Run is one pod's run, in seconds (-1: not within the wait).
type Run struct {
	Running float64 `json:"createToRunning"`
	Gone    float64 `json:"deleteToGone"`
}

// AgentResult is one agent's runs.
type AgentResult struct {
	Agent string `json:"agent"`
	Runs  []Run  `json:"runs"`
}

func main() {
	p := benchkit.New("csivolume", "bench-csivol")
	p.Namespaces = namespace + "-"
	reps := flag.Int("reps", 10, "pods per agent")
	p.Run(func(b *benchkit.Bench) error {
		driver, err := framework.BuildTool("./test/fakes/hostpathcsi")
		if err != nil {
			return err
		}
		ctx := context.Background()
		c := b.Client
		_ = c.StorageV1().CSIDrivers().Delete(ctx, driverName, metav1.DeleteOptions{})
		if _, err := c.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driverName},
			Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		defer func() { _ = c.StorageV1().CSIDrivers().Delete(ctx, driverName, metav1.DeleteOptions{}) }()
		results, err := benchkit.Each(b, func(name string) (AgentResult, error) {
			runs, err := measure(b, name, driver, *reps)
			_ = c.StorageV1().CSINodes().Delete(ctx, b.Node, metav1.DeleteOptions{})
			b.Clean(ctx, "")
			return AgentResult{Agent: name, Runs: runs}, err
		})
		if err != nil {
			return err
		}
		return p.Write(results, report(results, *reps, time.Now()))
	})
}

func measure(b *benchkit.Bench, name, driver string, reps int) ([]Run, error) {
	ctx := context.Background()
	c := b.Client
	node := b.Node
	a, err := nodeagent.Start(b.Spec(name))
	if err != nil {
		return nil, err
	}
	defer func() {
		a.Stop()
		framework.UnmountUnder(a.Dir, log.Printf)
	}()
	if err := nodeagent.WaitNodeReady(ctx, c, node, a, 2*time.Minute); err != nil {
		return nil, err
	}
	d, err := nodeagent.StartCSIDriver(driver, filepath.Join(a.Dir, "root", "plugins_registry"), node)
	if err != nil {
		return nil, err
	}
	defer d.Stop()
	if !nodeagent.Poll(30*time.Second, 50*time.Millisecond, func() bool { return nodeagent.InCSINode(c, node, driverName) }) {
		return nil, fmt.Errorf("the driver did not register with %s", name)
	}
	// A namespace per agent (the previous agent's is still going away),
	// once one of an interrupted run is gone.
	namespace := namespace + "-" + name
	if !nodeagent.Poll(2*time.Minute, 200*time.Millisecond, func() bool {
		_, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			ns, gerr := c.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
			return gerr == nil && ns.DeletionTimestamp == nil
		}
		return err == nil
	}) {
		return nil, fmt.Errorf("namespace %s not to be had", namespace)
	}
	conn, err := grpc.NewClient("unix://"+d.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var runs []Run
	for i := 0; i < reps; i++ {
		claim := fmt.Sprintf("%s-%d", name, i)
		if err := boundClaim(ctx, c, csipb.NewControllerClient(conn), namespace, claim); err != nil {
			return nil, err
		}
		r := Run{Running: -1, Gone: -1}
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: claim}, Spec: v1.PodSpec{
			NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1), AutomountServiceAccountToken: ptr.To(false),
			Containers: []v1.Container{{Name: "c", Image: b.Env["BUSYBOX_IMAGE"], Command: []string{"sh", "-c", "echo x > /data/f; sleep 3600"},
				VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		}}
		start := time.Now()
		if _, err := c.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		if nodeagent.Poll(2*time.Minute, 20*time.Millisecond, func() bool {
			p, err := c.CoreV1().Pods(namespace).Get(ctx, claim, metav1.GetOptions{})
			return err == nil && p.Status.Phase == v1.PodRunning
		}) {
			r.Running = time.Since(start).Seconds()
		}
		start = time.Now()
		if err := c.CoreV1().Pods(namespace).Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
			return nil, err
		}
		if nodeagent.Poll(2*time.Minute, 20*time.Millisecond, func() bool {
			_, err := c.CoreV1().Pods(namespace).Get(ctx, claim, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}) {
			r.Gone = time.Since(start).Seconds()
		}
		log.Printf("%s run %d: %+v", name, i, r)
		runs = append(runs, r)
		_ = c.CoreV1().PersistentVolumeClaims(namespace).Delete(ctx, claim, metav1.DeleteOptions{})
		_ = c.CoreV1().PersistentVolumes().Delete(ctx, "bench-csivol-"+claim, metav1.DeleteOptions{})
	}
	return runs, nil
}

// boundClaim makes a volume (CreateVolume) and a PV pre-bound to a PVC of
// that name, and waits for the PVC to be Bound.
func boundClaim(ctx context.Context, c kubernetes.Interface, ctrl csipb.ControllerClient, namespace, claim string) error {
	resp, err := ctrl.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: claim, CapacityRange: &csipb.CapacityRange{RequiredBytes: 16 << 20},
		Parameters: map[string]string{"type": "image"},
		VolumeCapabilities: []*csipb.VolumeCapability{{AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{}},
			AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}}})
	if err != nil {
		return err
	}
	size := *resource.NewQuantity(resp.GetVolume().GetCapacityBytes(), resource.BinarySI)
	// A PV an interrupted run left.
	_ = c.CoreV1().PersistentVolumes().Delete(ctx, "bench-csivol-"+claim, metav1.DeleteOptions{})
	nodeagent.Poll(30*time.Second, 100*time.Millisecond, func() bool {
		_, err := c.CoreV1().PersistentVolumes().Get(ctx, "bench-csivol-"+claim, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "bench-csivol-" + claim}, Spec: v1.PersistentVolumeSpec{
		Capacity: v1.ResourceList{v1.ResourceStorage: size}, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain, ClaimRef: &v1.ObjectReference{Namespace: namespace, Name: claim},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driverName,
			VolumeHandle: resp.GetVolume().GetVolumeId(), FSType: "ext4", VolumeAttributes: resp.GetVolume().GetVolumeContext()}}}}
	if _, err := c.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return err
	}
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim}, Spec: v1.PersistentVolumeClaimSpec{
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, VolumeName: pv.Name, StorageClassName: ptr.To(""),
		Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: size}}}}
	if _, err := c.CoreV1().PersistentVolumeClaims(namespace).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return err
	}
	if !nodeagent.Poll(time.Minute, 100*time.Millisecond, func() bool {
		got, err := c.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, claim, metav1.GetOptions{})
		return err == nil && got.Status.Phase == v1.ClaimBound
	}) {
		return fmt.Errorf("PVC %s not bound", claim)
	}
	return nil
}

func stat(runs []Run, f func(Run) float64) string {
	var v []float64
	for _, r := range runs {
		if x := f(r); x >= 0 {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return fmt.Sprintf("never (0/%d)", len(runs))
	}
	sort.Float64s(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return fmt.Sprintf("%.2f (min %.2f, max %.2f; %d/%d)", med, v[0], v[len(v)-1], len(v), len(runs))
}

func report(results []AgentResult, reps int, now time.Time) string {
	var b strings.Builder
	b.WriteString("## Pods with a CSI persistent volume, side by side (bench/csivolume)\n\n")
	fmt.Fprintf(&b, "Written by `go run ./bench/csivolume` on %s. Each agent runs as node bench-csivol with the project's\n", now.UTC().Format("2006-01-02"))
	b.WriteString("host-path driver (ext4 images on loop devices, staged then published; CSIDriver attachRequired false). Per pod: a\n")
	fmt.Fprintf(&b, "fresh volume and a PV pre-bound to its PVC (bound before the clock starts); %d pods in turn per agent. Seconds, median\n", reps)
	b.WriteString("(min, max; runs that finished): the pod's creation to Running, its deletion (grace 1 s) to its removal from the API.\n\n")
	b.WriteString("| agent | create -> Running | delete -> gone |\n|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.Agent, stat(r.Runs, func(x Run) float64 { return x.Running }), stat(r.Runs, func(x Run) float64 { return x.Gone }))
	}
	return b.String()
}
