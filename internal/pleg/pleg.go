package pleg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/metrics"
)

// EventType says what happened to a container or sandbox.
type EventType string

const (
	ContainerStarted EventType = "ContainerStarted"
	ContainerDied    EventType = "ContainerDied"
	ContainerRemoved EventType = "ContainerRemoved"
	ContainerChanged EventType = "ContainerChanged"
	SandboxChanged   EventType = "SandboxChanged"
)

// Event is one change to one pod.
type Event struct {
	// ID is the pod's UID.
	ID types.UID
	// Type is what happened.
	Type EventType
	// Data is the container or sandbox ID.
	Data string
	// State is the runtime's name of the container's or sandbox's state
	// after the change (runtimeapi.ContainerState or PodSandboxState), ""
	// when it was removed.
	State string
}

// Lister lists every pod the runtime has.
type Lister interface {
	GetPods(ctx context.Context) ([]*kubecontainer.RunningPod, error)
}

// Config configures a Generic PLEG.
type Config struct {
	Lister Lister
	// Period between relists.
	Period time.Duration
	// UnhealthyAfter: Healthy fails when no relist succeeded for this long.
	UnhealthyAfter time.Duration
	Clock          clock.WithTicker
	// Watchers are the runtime's event streams, tried in order; the first
	// one the runtime supports makes the PLEG relist as soon as something
	// changes, and relist on EventedPeriod only as a safety net.
	Watchers []Watcher
	// EventedPeriod is the relist period while an event stream works.
	EventedPeriod time.Duration
}

// Generic is a relisting PLEG.
type Generic struct {
	cfg    Config
	events chan *Event

	// Owned by Run.
	old map[string]entity

	streaming atomic.Bool // an event stream is open
	pending   pending     // stopped IDs the runtime's list may not show yet

	mu          sync.Mutex
	pods        []*kubecontainer.RunningPod
	lastSuccess time.Time
	lastStart   time.Time // of the last relist, for its interval
	lastErr     error
	started     time.Time
}

type entity struct {
	pod   types.UID
	state string
	isBox bool
}

// New returns a Generic PLEG for cfg. It fails when cfg has no Lister or
// no Period.
func New(cfg Config) (*Generic, error) {
	switch {
	case cfg.Lister == nil:
		return nil, errors.New("pleg: Config.Lister is required")
	case cfg.Period <= 0:
		return nil, errors.New("pleg: Config.Period is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.UnhealthyAfter == 0 {
		cfg.UnhealthyAfter = 3 * time.Minute
	}
	if cfg.EventedPeriod < cfg.Period {
		cfg.EventedPeriod = max(cfg.Period, 10*time.Second)
	}
	return &Generic{cfg: cfg, events: make(chan *Event, 1000)}, nil
}

// Watch returns the event channel.
func (g *Generic) Watch() <-chan *Event { return g.events }

// Run relists every period until ctx is done; with an event stream, as
// soon as the runtime reports a change and every EventedPeriod.
func (g *Generic) Run(ctx context.Context) error {
	g.mu.Lock()
	g.started = g.cfg.Clock.Now()
	g.mu.Unlock()
	kicks := make(chan struct{}, 1)
	kick := func() {
		select {
		case kicks <- struct{}{}:
		default: // a relist is already due: it sees this change too
		}
	}
	if len(g.cfg.Watchers) > 0 {
		go g.watch(ctx, kick)
	}
	t := g.cfg.Clock.NewTicker(g.cfg.Period)
	defer t.Stop()
	var retry clock.Timer
	var slowUntil time.Time
	g.Relist(ctx)
	for {
		var retryC <-chan time.Time
		if retry != nil {
			retryC = retry.C()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			evented := g.streaming.Load() && !g.cfg.Clock.Now().Before(slowUntil)
			if evented && g.cfg.Clock.Since(g.lastRelistStart()) < g.cfg.EventedPeriod {
				continue
			}
		case <-kicks:
			// Back-to-back events (a burst of pods) relist at most every
			// minRelistGap.
			if d := minRelistGap - g.cfg.Clock.Since(g.lastRelistStart()); d > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-g.cfg.Clock.After(d):
				}
			}
		case <-retryC:
			retry = nil
		}
		g.Relist(ctx)
		left, gaveUp := g.pending.settle(g.alive)
		if left && retry == nil {
			retry = g.cfg.Clock.NewTimer(pendingRetry)
		}
		if gaveUp {
			// The runtime said a container stopped but still lists it
			// running: relist every Period for a while, as without events.
			slowUntil = g.cfg.Clock.Now().Add(g.cfg.EventedPeriod)
		}
	}
}

// alive tells whether the last relist saw id running (a container) or
// ready (a sandbox). Only Run calls it.
func (g *Generic) alive(id string) bool {
	e, ok := g.old[id]
	return ok && (e.state == runtimeapi.ContainerState_CONTAINER_RUNNING.String() || e.state == runtimeapi.PodSandboxState_SANDBOX_READY.String())
}

func (g *Generic) lastRelistStart() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lastStart
}

// Relist lists the runtime once and emits the differences.
func (g *Generic) Relist(ctx context.Context) {
	start := g.cfg.Clock.Now()
	pods, err := g.cfg.Lister.GetPods(ctx)
	metrics.PLEGRelistDuration.Observe(g.cfg.Clock.Since(start).Seconds())
	g.mu.Lock()
	if !g.lastStart.IsZero() {
		metrics.PLEGRelistInterval.Observe(start.Sub(g.lastStart).Seconds())
	}
	g.lastStart = start
	prevErr := g.lastErr
	g.lastErr = err
	if err == nil {
		g.lastSuccess = g.cfg.Clock.Now()
		metrics.PLEGLastSeen.Set(float64(g.lastSuccess.Unix()))
		g.pods = pods
	}
	g.mu.Unlock()
	if err != nil {
		if prevErr == nil {
			klog.FromContext(ctx).Error(err, "PLEG relist failed: the container runtime is not answering")
		}
		return
	}
	if prevErr != nil {
		klog.FromContext(ctx).Info("PLEG relist succeeded again: the container runtime is back")
	}
	cur := make(map[string]entity, len(g.old))
	for _, p := range pods {
		for _, s := range p.Sandboxes {
			cur[s.Id] = entity{pod: p.UID, state: s.State.String(), isBox: true}
		}
		for _, c := range p.Containers {
			cur[c.Id] = entity{pod: p.UID, state: c.State.String()}
		}
	}
	if g.old == nil {
		// The first relist only learns the world; workers sync every pod at
		// start anyway.
		g.old = cur
		return
	}
	for id, e := range cur {
		o, had := g.old[id]
		if had && o.state == e.state {
			continue
		}
		g.send(ctx, &Event{ID: e.pod, Type: eventType(e), Data: id, State: e.state})
	}
	for id, o := range g.old {
		if _, ok := cur[id]; !ok {
			t := ContainerRemoved
			if o.isBox {
				t = SandboxChanged
			}
			g.send(ctx, &Event{ID: o.pod, Type: t, Data: id})
		}
	}
	g.old = cur
}

func eventType(e entity) EventType {
	if e.isBox {
		return SandboxChanged
	}
	switch e.state {
	case runtimeapi.ContainerState_CONTAINER_RUNNING.String():
		return ContainerStarted
	case runtimeapi.ContainerState_CONTAINER_EXITED.String():
		return ContainerDied
	default:
		return ContainerChanged
	}
}

func (g *Generic) send(ctx context.Context, e *Event) {
	select {
	case g.events <- e:
	default:
		klog.FromContext(ctx).Info("PLEG event channel is full; dropping an event (the periodic resync will catch up)", "pod", e.ID, "type", e.Type)
	}
}

// Healthy returns an error when relisting has not succeeded for
// UnhealthyAfter (or since start).
func (g *Generic) Healthy() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	last := g.lastSuccess
	if last.IsZero() {
		last = g.started
	}
	if last.IsZero() {
		return fmt.Errorf("pleg has not started")
	}
	if since := g.cfg.Clock.Since(last); since > g.cfg.UnhealthyAfter {
		return fmt.Errorf("pleg was last seen active %v ago; threshold is %v; last error: %v", since.Round(time.Second), g.cfg.UnhealthyAfter, g.lastErr)
	}
	return nil
}

// RunningPods returns what the last successful relist saw, and whether
// there was one. The slice is shared: read it, never change it.
func (g *Generic) RunningPods() ([]*kubecontainer.RunningPod, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pods, !g.lastSuccess.IsZero()
}

// RuntimeError returns the last relist's error: nil while the runtime answers.
func (g *Generic) RuntimeError() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lastErr
}

// RunningCounts are kubelet_running_pods and kubelet_running_containers
// from the last relist: the pods with a ready sandbox, the containers by
// state.
func (g *Generic) RunningCounts() (int, map[string]int) {
	pods, _ := g.RunningPods()
	ctrs := map[string]int{}
	count := 0
	for _, p := range pods {
		for _, s := range p.Sandboxes {
			if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				count++
				break
			}
		}
		for _, c := range p.Containers {
			ctrs[metrics.ContainerStateLabel(c.State)]++
		}
	}
	return count, ctrs
}
