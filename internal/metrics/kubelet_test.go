package metrics

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critesting "k8s.io/cri-api/pkg/apis/testing"
)

func TestInstrumentRuntimeCountsOperationsAndErrors(t *testing.T) {
	fake := critesting.NewFakeRuntimeService()
	rs := InstrumentRuntime(fake)
	ctx := context.Background()
	ops0 := testutil.ToFloat64(RuntimeOperations.WithLabelValues("run_podsandbox"))
	errs0 := testutil.ToFloat64(RuntimeOperationsErrors.WithLabelValues("run_podsandbox"))
	cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "n", Uid: "u"}}
	if _, err := rs.RunPodSandbox(ctx, cfg, ""); err != nil {
		t.Fatal(err)
	}
	fake.InjectError("RunPodSandbox", errors.New("boom"))
	if _, err := rs.RunPodSandbox(ctx, cfg, ""); err == nil {
		t.Fatal("injected error not returned")
	}
	if got := testutil.ToFloat64(RuntimeOperations.WithLabelValues("run_podsandbox")) - ops0; got != 2 {
		t.Errorf("run_podsandbox operations +%v, want +2", got)
	}
	if got := testutil.ToFloat64(RuntimeOperationsErrors.WithLabelValues("run_podsandbox")) - errs0; got != 1 {
		t.Errorf("run_podsandbox errors +%v, want +1", got)
	}
	// Calls the wrapper does not time still reach the runtime.
	if _, err := rs.ListContainers(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

func TestRunningCollector(t *testing.T) {
	SetRunning(func() (int, map[string]int) { return 3, map[string]int{"running": 4, "exited": 1} })
	if n := testutil.CollectAndCount(running); n != 3 {
		t.Errorf("collector emitted %d series, want 3", n)
	}
	if n := testutil.CollectAndCount(running, "kubelet_running_containers"); n != 2 {
		t.Errorf("kubelet_running_containers series: %d, want 2", n)
	}
	if n := testutil.CollectAndCount(running, "kubelet_running_pods"); n != 1 {
		t.Errorf("kubelet_running_pods series: %d, want 1", n)
	}
}
