package pleg

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/ctortest"
	"github.com/nodelet/nodelet/internal/kubecontainer"
)

type fakeLister struct {
	pods []*kubecontainer.RunningPod
	err  error
}

func (f *fakeLister) GetPods(context.Context) ([]*kubecontainer.RunningPod, error) {
	return f.pods, f.err
}

func rpod(uid string, boxState runtimeapi.PodSandboxState, containers map[string]runtimeapi.ContainerState) *kubecontainer.RunningPod {
	p := &kubecontainer.RunningPod{UID: types.UID("u-" + uid)}
	p.Sandboxes = []*runtimeapi.PodSandbox{{Id: uid + "-box", State: boxState}}
	for id, st := range containers {
		p.Containers = append(p.Containers, &runtimeapi.Container{Id: id, State: st})
	}
	return p
}

// newGeneric is New for tests: it fails the test on an error.
func newGeneric(t *testing.T, cfg Config) *Generic {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestNew(t *testing.T) {
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no lister", Config: Config{Period: time.Second}, WantErr: "Config.Lister is required"},
		{Name: "no period", Config: Config{Lister: &fakeLister{}}, WantErr: "Config.Period is required"},
		{Name: "a nil clock is the real one", Config: Config{Lister: &fakeLister{}, Period: time.Second}},
	}, func(t *testing.T, g *Generic) {
		ctortest.RealClock(t, g.cfg.Clock)
	})
}

func drain(g *Generic) map[string]EventType {
	out := map[string]EventType{}
	for id, e := range drainEvents(g) {
		out[id] = e.Type
	}
	return out
}

// drainEvents returns the pending events by container or sandbox ID.
func drainEvents(g *Generic) map[string]*Event {
	out := map[string]*Event{}
	for {
		select {
		case e := <-g.Watch():
			out[e.Data] = e
		default:
			return out
		}
	}
}

func TestRelistEmitsChanges(t *testing.T) {
	ready := runtimeapi.PodSandboxState_SANDBOX_READY
	run, exit := runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_EXITED
	l := &fakeLister{pods: []*kubecontainer.RunningPod{rpod("a", ready, map[string]runtimeapi.ContainerState{"c1": run, "c2": run})}}
	clk := testingclock.NewFakeClock(time.Now())
	g := newGeneric(t, Config{Lister: l, Period: time.Second, Clock: clk, UnhealthyAfter: time.Minute})
	ctx := context.Background()

	g.Relist(ctx)
	if ev := drain(g); len(ev) != 0 {
		t.Fatalf("the first relist emitted %v", ev)
	}
	g.Relist(ctx)
	if ev := drain(g); len(ev) != 0 {
		t.Fatalf("an unchanged relist emitted %v", ev)
	}
	l.pods = []*kubecontainer.RunningPod{rpod("a", ready, map[string]runtimeapi.ContainerState{"c1": exit, "c3": run})}
	g.Relist(ctx)
	want := map[string]EventType{"c1": ContainerDied, "c2": ContainerRemoved, "c3": ContainerStarted}
	wantState := map[string]string{"c1": exit.String(), "c2": "", "c3": run.String()}
	events := drainEvents(g)
	got := map[string]EventType{}
	for id, e := range events {
		got[id] = e.Type
		if e.State != wantState[id] {
			t.Errorf("event for %s: state %q, want %q", id, e.State, wantState[id])
		}
	}
	for id, typ := range want {
		if got[id] != typ {
			t.Errorf("event for %s: %q, want %q (all: %v)", id, got[id], typ, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if pods, ok := g.RunningPods(); !ok || len(pods) != 1 {
		t.Errorf("RunningPods: %v %v", pods, ok)
	}
}

func TestHealth(t *testing.T) {
	l := &fakeLister{}
	clk := testingclock.NewFakeClock(time.Now())
	g := newGeneric(t, Config{Lister: l, Period: time.Second, Clock: clk, UnhealthyAfter: time.Minute})
	g.Relist(context.Background())
	if err := g.Healthy(); err != nil || g.RuntimeError() != nil {
		t.Fatalf("healthy after a good relist: %v %v", err, g.RuntimeError())
	}
	l.err = errors.New("connection refused")
	g.Relist(context.Background())
	if g.RuntimeError() == nil {
		t.Error("a failed relist is not reported as a runtime error")
	}
	if err := g.Healthy(); err != nil {
		t.Errorf("unhealthy too early: %v", err)
	}
	clk.Step(2 * time.Minute)
	if err := g.Healthy(); err == nil {
		t.Error("healthy although no relist succeeded for 2 minutes")
	}
}
