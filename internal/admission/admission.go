package admission

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
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
	if r := precheck(node, pod); !r.Admit {
		return r
	}
	if fails := failures(node, pod, admitted); len(fails) > 0 {
		return fails[0].Result
	}
	return Result{Admit: true}
}

// precheck is what no preemption can help with, checked first as upstream:
// the pod's operating system, and (nodelet's own) the fields it cannot
// honour.
func precheck(node *v1.Node, pod *v1.Pod) Result {
	if node == nil {
		return Result{Admit: true}
	}
	if os, ok := pod.Labels[v1.LabelOSStable]; ok && os != nodeOS {
		return reject("PodOSSelectorNodeLabelDoesNotMatch", "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label")
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != nodeOS {
		return reject("PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS")
	}
	if sc := pod.Spec.SecurityContext; sc != nil && sc.SupplementalGroupsPolicy != nil &&
		*sc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict &&
		(node.Status.Features == nil || node.Status.Features.SupplementalGroupsPolicy == nil || !*node.Status.Features.SupplementalGroupsPolicy) {
		// Upstream's rejectPodAdmissionBasedOnSupplementalGroupsPolicy: the
		// runtime does not say it can (node.status.features).
		return reject("SupplementalGroupsPolicyNotSupported", "SupplementalGroupsPolicy=%s is not supported in this node", v1.SupplementalGroupsPolicyStrict)
	}
	if fields := podspec.Unsupported(pod); len(fields) > 0 {
		return reject("UnsupportedPodSpec", "%s", podspec.UnsupportedMessage(fields))
	}
	return Result{Admit: true}
}

// Insufficient is a resource the node lacks for a pod, upstream's
// InsufficientResourceError: cpu in millicores, the others in units.
type Insufficient struct {
	Resource                  v1.ResourceName
	Requested, Used, Capacity int64
}

// Short is how much of the resource is missing (upstream's
// GetInsufficientAmount).
func (i Insufficient) Short() int64 { return i.Requested - (i.Capacity - i.Used) }

// failure is one predicate the pod fails; insufficient is set when it is
// a resource the node lacks.
type failure struct {
	Result
	insufficient *Insufficient
}

// failures are the predicates the pod fails on node, in upstream's order
// (generalFilter): the resources (pods, cpu, memory, ephemeral storage,
// then the others by name), node affinity, node name, host ports, and the
// NoExecute taints, which static pods are not checked against.
func failures(node *v1.Node, pod *v1.Pod, admitted []*v1.Pod) []failure {
	if node == nil {
		return nil
	}
	var out []failure
	short := func(i Insufficient) {
		out = append(out, failure{insufficient: &i, Result: reject("OutOf"+string(i.Resource),
			"Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", i.Resource, i.Requested, i.Used, i.Capacity)})
	}
	alloc := node.Status.Allocatable
	if n := int64(len(admitted)) + 1; alloc.Pods().Value() > 0 && n > alloc.Pods().Value() {
		short(Insufficient{Resource: v1.ResourcePods, Requested: 1, Used: int64(len(admitted)), Capacity: alloc.Pods().Value()})
	}
	want := PodRequests(withoutDRABacked(pod))
	used := v1.ResourceList{}
	for _, p := range admitted {
		for name, q := range PodRequests(withoutDRABacked(p)) {
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
			short(Insufficient{Resource: name, Requested: amount(name, req), Used: amount(name, u), Capacity: amount(name, capQ)})
		}
	}
	fail := func(r Result) { out = append(out, failure{Result: r}) }
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		fail(reject("NodeAffinity", "Predicate NodeAffinity failed"))
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		fail(reject("NodeName", "Predicate NodeName failed: pod is bound to node %q", pod.Spec.NodeName))
	}
	if port, clash := hostPortClash(pod, admitted); clash {
		fail(reject("NodePorts", "Predicate NodePorts failed: host port %d is already in use", port))
	}
	if !podspec.IsStatic(pod) {
		noExecute := func(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }
		if taint, found := v1helper.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, noExecute, false); found {
			fail(reject("TaintToleration", "Predicate TaintToleration failed: node has untolerated taint {%s: %s}", taint.Key, taint.Value))
		}
	}
	return out
}

// withoutDRABacked is the pod without the extended resource requests the
// scheduler satisfied through its extended resource claim
// (status.extendedResourceClaimStatus, DRAExtendedResource): those are
// prepared by the DRA manager, not counted against allocatable (upstream's
// removeMissingExtendedResources). The pod itself when it has none.
func withoutDRABacked(pod *v1.Pod) *v1.Pod {
	s := pod.Status.ExtendedResourceClaimStatus
	if s == nil || len(s.RequestMappings) == 0 {
		return pod
	}
	backed := map[string]bool{} // container/resource
	for _, m := range s.RequestMappings {
		backed[m.ContainerName+"/"+m.ResourceName] = true
	}
	cp := pod.DeepCopy()
	strip := func(cs []v1.Container) {
		for i := range cs {
			for name := range cs[i].Resources.Requests {
				if backed[cs[i].Name+"/"+string(name)] {
					delete(cs[i].Resources.Requests, name)
				}
			}
		}
	}
	strip(cp.Spec.InitContainers)
	strip(cp.Spec.Containers)
	return cp
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

// PodRequests is the pod's effective requests, as upstream's admission
// counts them (component-helpers' PodRequests): its pod-level requests
// where set, else the larger of the sum of its app (and sidecar)
// containers and its largest init container; plus overhead.
func PodRequests(pod *v1.Pod) v1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
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

// PodLevelResourcesGate refuses, while the PodLevelResources gate is off,
// a pod that sets pod-level resources (spec.resources): nodelet does not
// run such a pod as if they were absent.
type PodLevelResourcesGate struct{ On bool }

// Admit refuses a pod with spec.resources when the gate is off.
func (g PodLevelResourcesGate) Admit(_ context.Context, a Attributes) Result {
	if r := a.Pod.Spec.Resources; g.On || r == nil || (len(r.Requests) == 0 && len(r.Limits) == 0) {
		return Result{Admit: true}
	}
	return Result{Reason: "UnsupportedPodSpec", Message: "Pod uses what this node cannot provide: spec.resources (pod-level resources need the feature gate PodLevelResources, which is off on this node)"}
}
