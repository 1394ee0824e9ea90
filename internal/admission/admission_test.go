package admission

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func node() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"disk": "ssd"}},
		Spec:       v1.NodeSpec{Taints: []v1.Taint{{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoExecute}}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourcePods: resource.MustParse("3"),
			"example.com/dev": resource.MustParse("2"),
		}},
	}
}

func pod(cpu string, mutate ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{Spec: v1.PodSpec{NodeName: "n1",
		Tolerations: []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpExists}},
		Containers:  []v1.Container{{Name: "c"}}}}
	if cpu != "" {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// dev makes the pod ask for n of example.com/dev.
func dev(n string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		q := resource.MustParse(n)
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{"example.com/dev": q}
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{"example.com/dev": q}
	}
}

// draBacked says the scheduler satisfied container's example.com/dev with
// the pod's extended resource claim (DRAExtendedResource).
func draBacked(container string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-extended-resources-abcde",
			RequestMappings: []v1.ContainerExtendedResourceRequest{{ContainerName: container, ResourceName: "example.com/dev", RequestName: "container-0-request-0"}}}
	}
}

func TestAdmit(t *testing.T) {
	tests := []struct {
		name     string
		pod      *v1.Pod
		admitted []*v1.Pod
		reason   string
		message  string
	}{
		{"fits", pod("1"), []*v1.Pod{pod("500m")}, "", ""},
		{"out of cpu", pod("1500m"), []*v1.Pod{pod("1")}, "OutOfcpu", "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"},
		{"out of memory", pod("", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("2Gi")}
		}), nil, "OutOfmemory", "memory, requested: 2147483648"},
		{"out of pods", pod(""), []*v1.Pod{pod(""), pod(""), pod("")}, "OutOfpods", "pods, requested: 1, used: 3, capacity: 3"},
		{"other node", pod("", func(p *v1.Pod) { p.Spec.NodeName = "n2" }), nil, "NodeName", ""},
		{"user namespaces: the runtime decides", pod("", func(p *v1.Pod) { f := false; p.Spec.HostUsers = &f }), nil, "", ""},
		{"supplementalGroupsPolicy Strict on a node without it", pod("", func(p *v1.Pod) {
			strict := v1.SupplementalGroupsPolicyStrict
			p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &strict}
		}), nil, "SupplementalGroupsPolicyNotSupported", "SupplementalGroupsPolicy=Strict is not supported in this node"},
		{"supplementalGroupsPolicy Merge", pod("", func(p *v1.Pod) {
			merge := v1.SupplementalGroupsPolicyMerge
			p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &merge}
		}), nil, "", ""},
		{"stop signal: the runtime's (kuberuntime)", pod("", func(p *v1.Pod) {
			sig := v1.SIGUSR1
			p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{StopSignal: &sig}
		}), nil, "", ""},
		{"windows", pod("", func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Windows} }), nil, "PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS"},
		{"linux", pod("", func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Linux} }), nil, "", ""},
		{"os label", pod("", func(p *v1.Pod) { p.Labels = map[string]string{"kubernetes.io/os": "windows"} }), nil,
			"PodOSSelectorNodeLabelDoesNotMatch", "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"},
		{"node selector mismatch", pod("", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "hdd"} }), nil, "NodeAffinity", "Predicate NodeAffinity failed"},
		{"node selector match", pod("", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }), nil, "", ""},
		{"untolerated NoExecute taint", pod("", func(p *v1.Pod) { p.Spec.Tolerations = nil }), nil, "TaintToleration", "dedicated"},
		{"host port clash", pod("", func(p *v1.Pod) { p.Spec.Containers[0].Ports = []v1.ContainerPort{{HostPort: 80, Protocol: "TCP"}} }),
			[]*v1.Pod{pod("", func(p *v1.Pod) { p.Spec.Containers[0].Ports = []v1.ContainerPort{{HostPort: 80, Protocol: "TCP"}} })}, "NodePorts", ""},
		{"extended resource fits", pod("", dev("1")), []*v1.Pod{pod("", dev("1"))}, "", ""},
		{"out of an extended resource", pod("", dev("1")), []*v1.Pod{pod("", dev("2"))}, "OutOfexample.com/dev",
			"Node didn't have enough resource: example.com/dev, requested: 1, used: 2, capacity: 2"},
		{"DRA-backed extended resource not counted", pod("", dev("2"), draBacked("c")), []*v1.Pod{pod("", dev("2"))}, "", ""},
		{"DRA-backed in another container only", pod("", dev("2"), draBacked("other")), []*v1.Pod{pod("", dev("2"))}, "OutOfexample.com/dev",
			"Node didn't have enough resource: example.com/dev, requested: 2, used: 2, capacity: 2"},
		{"an admitted pod's DRA-backed requests not counted", pod("", dev("2")), []*v1.Pod{pod("", dev("2"), draBacked("c"))}, "", ""},
		{"cluster-level extended resource not checked", pod("", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{"example.com/quota": resource.MustParse("5")}
		}), nil, "", ""},
		{"init container max, not sum", pod("1", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}}}
		}), nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Admit(node(), tt.pod, tt.admitted)
			if tt.reason == "" {
				if !r.Admit {
					t.Fatalf("rejected: %s %s", r.Reason, r.Message)
				}
				return
			}
			if r.Admit || r.Reason != tt.reason || !strings.Contains(r.Message, tt.message) {
				t.Errorf("got %+v, want reason %s with %q", r, tt.reason, tt.message)
			}
		})
	}
}

// A node whose runtime says it honours supplementalGroupsPolicy
// (status.features) admits Strict pods.
func TestAdmitSupplementalGroupsPolicyStrict(t *testing.T) {
	n := node()
	n.Status.Features = &v1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(true)}
	strict := v1.SupplementalGroupsPolicyStrict
	p := pod("", func(p *v1.Pod) { p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &strict} })
	if r := precheck(n, p); !r.Admit {
		t.Errorf("Strict on a node that supports it: %+v", r)
	}
}

func TestPodLevelResourcesGate(t *testing.T) {
	plain := &v1.Pod{}
	withPLR := &v1.Pod{Spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}
	for _, tc := range []struct {
		on    bool
		pod   *v1.Pod
		admit bool
	}{{true, withPLR, true}, {false, plain, true}, {false, withPLR, false}} {
		r := PodLevelResourcesGate{On: tc.on}.Admit(context.Background(), Attributes{Pod: tc.pod})
		if r.Admit != tc.admit || (!r.Admit && (r.Reason != "UnsupportedPodSpec" || !strings.Contains(r.Message, "PodLevelResources"))) {
			t.Errorf("gate %v, spec.resources %v: %+v", tc.on, tc.pod.Spec.Resources != nil, r)
		}
	}
}
