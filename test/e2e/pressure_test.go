package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// nodeCondition is the node's condition of type typ, nil without one.
func nodeCondition(t *testing.T, c *framework.Cluster, node string, typ v1.NodeConditionType) *v1.NodeCondition {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// nodeEventReasons are the reasons of the node's events, oldest first.
func nodeEventReasons(t *testing.T, c *framework.Cluster, node string) []string {
	t.Helper()
	evs, err := c.Client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

func hasEvent(events []string, prefix string) bool {
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

// rejectedEvicted: the pod was refused by the node's pressure admission
// with msg (the status says "Pod was rejected: " first, as upstream's).
func rejectedEvicted(msg string) func(*v1.Pod) bool {
	return func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted" && p.Status.Message == "Pod was rejected: "+msg
	}
}

// TestPressureDiskConditionAndAdmission: nodelet's root directory is a
// 64 MiB tmpfs and nodefs.available's hard threshold 50%. Filling it from
// the host turns DiskPressure True within a monitoring period (10 s), with
// upstream's reason, message and node events; a new pod is then refused
// (Failed, reason Evicted, "The node had condition: [DiskPressure]. ")
// and the running one is evicted (nothing else can be reclaimed). Once the file is gone the condition
// stays for the pressure transition period (5 s here), then turns False,
// and a new pod runs.
func TestPressureDiskConditionAndAdmission(t *testing.T) {
	name := "e2e-pressure-disk"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	tmpfsRoot(t, n, "size=64m")
	n.AppendConfig("evictionHard:\n  nodefs.available: \"50%\"\nevictionPressureTransitionPeriod: 5s\n")
	n.Start()
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		return c.NodeReady(t, name) == v1.ConditionTrue
	}, "node %s Ready", name)
	ns := c.Namespace(t, "pressure-disk")
	ctx := context.Background()
	if cond := nodeCondition(t, c, name, v1.NodeDiskPressure); cond == nil || cond.Status != v1.ConditionFalse || cond.Reason != "KubeletHasNoDiskPressure" {
		t.Fatalf("DiskPressure before filling: %+v", cond)
	}
	before := busyboxPod("before", name, "sleep 3600")
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, before, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "before", 60*time.Second, "running", podReady)

	// 40 of 64 MiB: below 50% available.
	fill := filepath.Join(n.RootDir, "fill")
	if err := os.WriteFile(fill, make([]byte, 40<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	filled := time.Now()
	var cond *v1.NodeCondition
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		cond = nodeCondition(t, c, name, v1.NodeDiskPressure)
		return cond != nil && cond.Status == v1.ConditionTrue
	}, "DiskPressure True after filling the root directory")
	t.Logf("DiskPressure True %v after the fill", time.Since(filled).Round(100*time.Millisecond))
	if cond.Reason != "KubeletHasDiskPressure" || cond.Message != "kubelet has disk pressure" {
		t.Errorf("DiskPressure condition %q %q", cond.Reason, cond.Message)
	}
	if ready := nodeCondition(t, c, name, v1.NodeReady); ready == nil || ready.Status != v1.ConditionTrue {
		t.Errorf("Ready under disk pressure: %+v", ready)
	}
	framework.Eventually(t, 20*time.Second, 500*time.Millisecond, func() bool {
		evs := nodeEventReasons(t, c, name)
		return hasEvent(evs, "NodeHasDiskPressure: Node "+name+" status is now: NodeHasDiskPressure") &&
			hasEvent(evs, "EvictionThresholdMet: Attempting to reclaim ephemeral-storage")
	}, "NodeHasDiskPressure and EvictionThresholdMet events")

	refused := busyboxPod("refused", name, "sleep 3600")
	refused.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("16Mi")}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, refused, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "refused", 30*time.Second, "Failed/Evicted by admission", rejectedEvicted("The node had condition: [DiskPressure]. "))
	// Nothing on the node can be reclaimed (the file is the host's): the pod
	// that ran before is evicted, as upstream would.
	waitPod(t, c, ns, "before", 30*time.Second, "evicted", evictedWith("The node was low on resource: ephemeral-storage. "))

	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	framework.Eventually(t, 40*time.Second, 200*time.Millisecond, func() bool {
		cond = nodeCondition(t, c, name, v1.NodeDiskPressure)
		return cond != nil && cond.Status == v1.ConditionFalse
	}, "DiskPressure False after the file is gone and the transition period passed")
	took := time.Since(freed)
	t.Logf("DiskPressure False %v after the file was removed (transition period 5 s)", took.Round(100*time.Millisecond))
	// The period counts from the last observation that found the pressure:
	// the eviction's, which precedes the removal by the evicted pod's grace
	// period (1 s) and its status's way to the API.
	if took < 3*time.Second {
		t.Errorf("DiskPressure cleared after %v, within the 5 s transition period", took)
	}
	if cond.Reason != "KubeletHasNoDiskPressure" {
		t.Errorf("reason %q", cond.Reason)
	}
	after := busyboxPod("after", name, "sleep 3600")
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, after, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "after", 60*time.Second, "running once the pressure is gone", podReady)
	framework.Eventually(t, 20*time.Second, 500*time.Millisecond, func() bool {
		return hasEvent(nodeEventReasons(t, c, name), "NodeHasNoDiskPressure: ")
	}, "NodeHasNoDiskPressure event")
}

// TestPressureMemoryAndPIDAdmission: thresholds above what the machine has
// (memory.available 99% of the memory: a running machine's working set is
// above 1%; pid.available a billion) put the node under memory and PID
// pressure at once, without stressing the machine (the 1% left is
// allocatable, enough for the pods' requests). Both
// conditions are True with upstream's reasons; a BestEffort pod, a
// Burstable one and a BestEffort one tolerating memory pressure are all
// refused (PID pressure refuses every pod that is not critical); a static
// pod (critical) runs and is never evicted. A second node under memory
// pressure alone admits the Burstable and the tolerating pods (which its
// eviction manager then evicts: it cannot relieve the pressure otherwise)
// and refuses the plain BestEffort one.
func TestPressureMemoryAndPIDAdmission(t *testing.T) {
	for _, tc := range []struct {
		node, config string
		conditions   []v1.NodeConditionType
		admitted     map[string]bool // pod -> admitted
		message      string
	}{
		{"e2e-pressure-mem-pid", "evictionHard:\n  memory.available: \"99%\"\n  pid.available: \"1000000000\"\n",
			[]v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodePIDPressure},
			map[string]bool{"besteffort": false, "burstable": false, "tolerating": false}, "The node had condition: [MemoryPressure PIDPressure]. "},
		{"e2e-pressure-mem", "evictionHard:\n  memory.available: \"99%\"\n",
			[]v1.NodeConditionType{v1.NodeMemoryPressure},
			map[string]bool{"besteffort": false, "burstable": true, "tolerating": true}, "The node had condition: [MemoryPressure]. "},
	} {
		t.Run(tc.node, func(t *testing.T) {
			c := framework.RequireCluster(t)
			n := framework.NewClusterNodelet(t, c, tc.node)
			n.AppendConfig(tc.config)
			static := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: critical, namespace: default}
spec:
  containers:
  - {name: c, image: %s, command: [sh, -c, "sleep 3600"]}
`, busybox)
			if err := os.WriteFile(filepath.Join(n.ManifestDir, "critical.yaml"), []byte(static), 0o644); err != nil {
				t.Fatal(err)
			}
			n.Start()
			framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
				for _, typ := range tc.conditions {
					if cond := nodeCondition(t, c, tc.node, typ); cond == nil || cond.Status != v1.ConditionTrue {
						return false
					}
				}
				return c.NodeReady(t, tc.node) == v1.ConditionTrue
			}, "%v True and the node Ready", tc.conditions)
			want := map[v1.NodeConditionType]string{v1.NodeMemoryPressure: "KubeletHasInsufficientMemory", v1.NodePIDPressure: "KubeletHasInsufficientPID"}
			for _, typ := range tc.conditions {
				if cond := nodeCondition(t, c, tc.node, typ); cond.Reason != want[typ] {
					t.Errorf("%s reason %q, want %q", typ, cond.Reason, want[typ])
				}
			}
			ns := c.Namespace(t, "pressure")
			ctx := context.Background()
			pods := map[string]*v1.Pod{
				"besteffort": busyboxPod("besteffort", tc.node, "sleep 3600"),
				"burstable":  busyboxPod("burstable", tc.node, "sleep 3600"),
				"tolerating": busyboxPod("tolerating", tc.node, "sleep 3600"),
			}
			pods["burstable"].Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("16Mi")}
			pods["tolerating"].Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
			for _, p := range pods {
				if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for name, ok := range tc.admitted {
				if ok {
					// Admitted, then evicted by the eviction manager (the
					// pressure is real to it): never refused.
					admittedThenEvicted := func(p *v1.Pod) bool {
						return podReady(p) || evictedWith("The node was low on resource: memory. ")(p)
					}
					waitPod(t, c, ns, name, 60*time.Second, "admitted (running, or evicted after)", admittedThenEvicted)
				} else {
					waitPod(t, c, ns, name, 30*time.Second, "refused with reason Evicted", rejectedEvicted(tc.message))
				}
			}
			mirror := "critical-" + tc.node
			waitPod(t, c, "default", mirror, 60*time.Second, "the static pod running under pressure", podReady)
		})
	}
}
