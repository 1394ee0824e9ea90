package admission

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/podspec"
)

// nodeOS is the node's operating system (nodelet runs on Linux only).
const nodeOS = "linux"

// Result is an admission decision; Reason and Message say why not.
type Result struct {
	Admit   bool
	Reason  string
	Message string
}

// Admit decides whether pod may run on node next to the admitted pods.
func Admit(node *v1.Node, pod *v1.Pod, admitted []*v1.Pod) Result {
	if node == nil {
		return Result{Admit: true}
	}
	// The OS first, as upstream: preempting other pods would not help.
	if os, ok := pod.Labels[v1.LabelOSStable]; ok && os != nodeOS {
		return reject("PodOSSelectorNodeLabelDoesNotMatch", "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label")
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != nodeOS {
		return reject("PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS")
	}
	if fields := podspec.Unsupported(pod); len(fields) > 0 {
		return reject("UnsupportedPodSpec", "%s", podspec.UnsupportedMessage(fields))
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return reject("NodeName", "Predicate NodeName failed: pod is bound to node %q", pod.Spec.NodeName)
	}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		return reject("NodeAffinity", "Predicate NodeAffinity failed")
	}
	noExecute := func(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }
	if taint, found := v1helper.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, noExecute, false); found {
		return reject("TaintToleration", "Predicate TaintToleration failed: node has untolerated taint {%s: %s}", taint.Key, taint.Value)
	}
	if port, clash := hostPortClash(pod, admitted); clash {
		return reject("NodePorts", "Predicate NodePorts failed: host port %d is already in use", port)
	}
	alloc := node.Status.Allocatable
	if n := int64(len(admitted)) + 1; alloc.Pods().Value() > 0 && n > alloc.Pods().Value() {
		return reject("OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", len(admitted), alloc.Pods().Value())
	}
	want := PodRequests(pod)
	used := v1.ResourceList{}
	for _, p := range admitted {
		for name, q := range PodRequests(p) {
			podspec.AddResource(used, name, q)
		}
	}
	for _, name := range checkedResources(want) {
		req := want[name]
		if req.IsZero() {
			continue
		}
		// A resource the node does not report is not checked: extended
		// resources unknown to nodes are cluster-level ones, as upstream.
		capQ, has := alloc[name]
		if !has {
			continue
		}
		u := used[name]
		total := u.DeepCopy()
		total.Add(req)
		if total.Cmp(capQ) > 0 {
			return reject("OutOf"+string(name), "Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
				name, amount(name, req), amount(name, u), amount(name, capQ))
		}
	}
	return Result{Admit: true}
}

// checkedResources are the resources admission compares with allocatable:
// cpu, memory and ephemeral storage first, then the others the pod asks
// for (extended resources, hugepages) by name.
func checkedResources(want v1.ResourceList) []v1.ResourceName {
	out := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage}
	var rest []v1.ResourceName
	for name := range want {
		if !slices.Contains(out, name) {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

func reject(reason, format string, args ...any) Result {
	return Result{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// amount is how upstream prints a quantity in admission messages:
// millicores for cpu, bytes otherwise.
func amount(name v1.ResourceName, q resource.Quantity) int64 {
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// PodRequests is the pod's effective requests: the larger of the sum of its
// app (and sidecar) containers and its largest init container, plus overhead.
func PodRequests(pod *v1.Pod) v1.ResourceList {
	sum := v1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		for name, q := range c.Resources.Requests {
			podspec.AddResource(sum, name, q)
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			for name, q := range c.Resources.Requests {
				podspec.AddResource(sum, name, q)
			}
			continue
		}
		for name, q := range c.Resources.Requests {
			if cur, ok := sum[name]; !ok || q.Cmp(cur) > 0 {
				sum[name] = q.DeepCopy()
			}
		}
	}
	for name, q := range pod.Spec.Overhead {
		podspec.AddResource(sum, name, q)
	}
	return sum
}

func hostPortClash(pod *v1.Pod, admitted []*v1.Pod) (int32, bool) {
	type hostPort struct {
		port  int32
		proto v1.Protocol
		ip    string
	}
	each := func(p *v1.Pod, fn func(hostPort)) {
		for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for _, c := range cs {
				for _, cp := range c.Ports {
					if cp.HostPort > 0 {
						fn(hostPort{cp.HostPort, cp.Protocol, cp.HostIP})
					}
				}
			}
		}
	}
	var used []hostPort
	for _, p := range admitted {
		each(p, func(h hostPort) { used = append(used, h) })
	}
	var clash int32
	each(pod, func(h hostPort) {
		for _, u := range used {
			// The same port and protocol clash unless both name different IPs.
			if u.port == h.port && u.proto == h.proto && (u.ip == "" || h.ip == "" || u.ip == h.ip) {
				clash = h.port
			}
		}
	})
	return clash, clash != 0
}
