package kuberuntime

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/tracing"
)

// EventContainerGCFailed is the node event of a failed collection.
const EventContainerGCFailed = "ContainerGCFailed"

// GCConfig configures the container garbage collection loop.
type GCConfig struct {
	// Manager collects; Pods says which pods' leftovers may all go;
	// Recorder and Node are the node events' (a failure). Required.
	Manager  *Manager
	Pods     GCPods
	Recorder record.EventRecorder
	Node     *v1.ObjectReference
	// Policy is the dead containers' policy (the flags').
	Policy GCPolicy
	// Period is how often to collect (upstream: every minute). Required.
	Period time.Duration
	// SourcesReady tells whether every pod source was seen once: before,
	// no pod is taken for removable. Required.
	SourcesReady func() bool
	// Clock times the period (the real clock when nil).
	Clock clock.WithTicker
	// Tracer records a Containers/GarbageCollect span per collection, as
	// upstream; nil records none.
	Tracer trace.Tracer
}

// GC collects dead containers and sandboxes every period (Run).
type GC struct {
	cfg GCConfig
}

// NewGC returns the collection loop of cfg.
func NewGC(cfg GCConfig) (*GC, error) {
	switch {
	case cfg.Manager == nil:
		return nil, errors.New("kuberuntime: GCConfig.Manager is required")
	case cfg.Pods == nil:
		return nil, errors.New("kuberuntime: GCConfig.Pods is required")
	case cfg.Recorder == nil:
		return nil, errors.New("kuberuntime: GCConfig.Recorder is required")
	case cfg.Node == nil:
		return nil, errors.New("kuberuntime: GCConfig.Node is required")
	case cfg.Period <= 0:
		return nil, errors.New("kuberuntime: GCConfig.Period must be positive")
	case cfg.SourcesReady == nil:
		return nil, errors.New("kuberuntime: GCConfig.SourcesReady is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Tracer == nil {
		cfg.Tracer = tracing.Noop()
	}
	return &GC{cfg: cfg}, nil
}

// Run collects every period until ctx is done; a failure is logged and a
// node event (ContainerGCFailed), as upstream, and the next period tries
// again.
func (g *GC) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	tick := g.cfg.Clock.NewTicker(g.cfg.Period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
		}
		ctx, span := g.cfg.Tracer.Start(ctx, "Containers/GarbageCollect")
		err := g.cfg.Manager.GarbageCollect(ctx, g.cfg.Policy, g.cfg.Pods, g.cfg.SourcesReady())
		span.End()
		if err != nil {
			logger.Error(err, "Container garbage collection failed")
			g.cfg.Recorder.Event(g.cfg.Node, v1.EventTypeWarning, EventContainerGCFailed, err.Error())
		}
	}
}

// Reclaim is the eviction manager's node-level reclaim of dead containers
// (DeleteAllUnusedContainers).
func (g *GC) Reclaim(ctx context.Context) error {
	return g.cfg.Manager.DeleteAllUnusedContainers(ctx, g.cfg.Pods)
}
