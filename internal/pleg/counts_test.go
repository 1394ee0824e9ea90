package pleg

import (
	"maps"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/kubecontainer"
)

// RunningCounts counts the last relist's pods with a ready sandbox and its
// containers by state; nothing before the first relist.
func TestRunningCounts(t *testing.T) {
	l := &fakeLister{pods: []*kubecontainer.RunningPod{
		rpod("a", runtimeapi.PodSandboxState_SANDBOX_READY, map[string]runtimeapi.ContainerState{
			"a1": runtimeapi.ContainerState_CONTAINER_RUNNING, "a2": runtimeapi.ContainerState_CONTAINER_EXITED}),
		rpod("b", runtimeapi.PodSandboxState_SANDBOX_NOTREADY, map[string]runtimeapi.ContainerState{"b1": runtimeapi.ContainerState_CONTAINER_EXITED}),
		rpod("c", runtimeapi.PodSandboxState_SANDBOX_READY, map[string]runtimeapi.ContainerState{"c1": runtimeapi.ContainerState_CONTAINER_CREATED}),
	}}
	g := newGeneric(t, Config{Lister: l, Period: 1})
	if pods, ctrs := g.RunningCounts(); pods != 0 || len(ctrs) != 0 {
		t.Fatalf("before a relist: %d pods, %v", pods, ctrs)
	}
	g.Relist(t.Context())
	pods, ctrs := g.RunningCounts()
	if pods != 2 {
		t.Errorf("%d running pods, want 2", pods)
	}
	if want := map[string]int{"running": 1, "exited": 2, "created": 1}; !maps.Equal(ctrs, want) {
		t.Errorf("containers %v, want %v", ctrs, want)
	}
}
