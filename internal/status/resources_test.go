package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/kubecontainer"
)

func TestStatusResources(t *testing.T) {
	q := resource.MustParse
	spec := &v1.Container{Name: "c", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: q("100m"), v1.ResourceMemory: q("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: q("200m"), v1.ResourceMemory: q("128Mi")}}}
	running := func(r *kubecontainer.ContainerResources) *kubecontainer.ContainerStatus {
		return &kubecontainer.ContainerStatus{ID: "a", State: runtimeapi.ContainerState_CONTAINER_RUNNING, Resources: r}
	}
	oldRun := &v1.ContainerStatus{ContainerID: "containerd://a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
		Resources: &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: q("150m"), v1.ResourceMemory: q("32Mi")},
			Limits: v1.ResourceList{v1.ResourceCPU: q("300m"), v1.ResourceMemory: q("256Mi")}}}
	mq := func(s string) *resource.Quantity { x := q(s); return &x }
	tests := []struct {
		name string
		cs   *kubecontainer.ContainerStatus
		old  *v1.ContainerStatus
		want v1.ResourceRequirements
	}{
		{name: "exited: the spec's", cs: &kubecontainer.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED,
			Resources: &kubecontainer.ContainerResources{CPULimit: mq("1")}}, want: spec.Resources},
		{name: "running: the runtime's values", cs: running(&kubecontainer.ContainerResources{CPURequest: mq("250m"), CPULimit: mq("500m"), MemoryLimit: mq("1Gi")}),
			want: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: q("250m"), v1.ResourceMemory: q("64Mi")},
				Limits: v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("1Gi")}}},
		{name: "running, the runtime says nothing, same container: the last status's", cs: running(nil), old: oldRun,
			want: *oldRun.Resources},
		{name: "running, the runtime says nothing, first status: the spec's", cs: running(nil), want: spec.Resources},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := statusResources(spec, tt.cs, tt.old, "containerd://a")
			if !apiequality.Semantic.DeepEqual(*got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	// Tiny CPU values the runtime rounds: the spec's stays when as tiny.
	tiny := &v1.Container{Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: q("1m")}, Limits: v1.ResourceList{v1.ResourceCPU: q("5m")}}}
	got := statusResources(tiny, running(&kubecontainer.ContainerResources{CPURequest: mq("2m"), CPULimit: mq("10m")}), nil, "x")
	if got.Requests.Cpu().MilliValue() != 1 || got.Limits.Cpu().MilliValue() != 5 {
		t.Errorf("tiny: %v", got)
	}
}
