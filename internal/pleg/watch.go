package pleg

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// ErrUnsupported is returned (wrapped) by a Watcher whose runtime has no such
// event stream: the PLEG stops asking it and relists on its period alone.
var ErrUnsupported = errors.New("the runtime has no such event stream")

// Watcher streams what changes in the runtime, so that the PLEG relists at
// once instead of at its next period. Events are only hints: the relist is
// what the PLEG reports, so a lost or duplicated event costs latency, never
// correctness.
type Watcher interface {
	// Name says which stream this is, for logs.
	Name() string
	// Watch calls changed for every container or sandbox that changed, with
	// its ID and whether it stopped, until ctx is done or the stream breaks
	// (its error). It calls established once the stream is known to work.
	// A runtime without the stream: an error wrapping ErrUnsupported.
	Watch(ctx context.Context, established func(), changed func(id string, stopped bool)) error
}

// unsupported tells whether a gRPC error means the method does not exist.
func unsupported(err error) bool {
	return status.Code(err) == codes.Unimplemented
}

// pending holds the IDs an event said stopped: a runtime may publish the
// event before its own list shows the container exited, so the PLEG relists
// again shortly until it does (at most maxTries times).
type pending struct {
	mu  sync.Mutex
	ids map[string]int
}

const (
	pendingRetry    = 20 * time.Millisecond
	pendingMaxTries = 50 // a second
	// minRelistGap spaces relists that events ask for back to back.
	minRelistGap = 20 * time.Millisecond
)

func (p *pending) add(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ids == nil {
		p.ids = map[string]int{}
	}
	p.ids[id] = 0
}

// settle drops the IDs the relist saw stopped (or gone, or tried too
// often) and tells whether some are left, and whether it gave up on one the
// runtime still lists as running.
func (p *pending) settle(alive func(id string) bool) (left, gaveUp bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, tries := range p.ids {
		if !alive(id) {
			delete(p.ids, id)
			continue
		}
		if tries+1 >= pendingMaxTries {
			delete(p.ids, id)
			gaveUp = true
			continue
		}
		p.ids[id] = tries + 1
	}
	return len(p.ids) > 0, gaveUp
}

// endpoint is a CRI endpoint as gRPC dials it: a bare socket path, which
// the CRI client accepts, becomes unix://path.
func endpoint(e string) string {
	if strings.HasPrefix(e, "/") {
		return "unix://" + e
	}
	return e
}

// watch runs the first watcher the runtime supports, forever: a broken
// stream is reopened with back-off, meanwhile the PLEG relists on its
// period. kick asks the Run loop for a relist.
func (g *Generic) watch(ctx context.Context, kick func()) {
	logger := klog.FromContext(ctx)
	watchers := append([]Watcher(nil), g.cfg.Watchers...)
	delay := time.Second
	for len(watchers) > 0 && ctx.Err() == nil {
		w := watchers[0]
		start := g.cfg.Clock.Now()
		// over guards against a late "established" (a timer) marking the
		// PLEG as streaming after this attempt ended.
		var mu sync.Mutex
		over := false
		err := w.Watch(ctx, func() {
			mu.Lock()
			defer mu.Unlock()
			if over {
				return
			}
			g.streaming.Store(true)
			logger.Info("Watching the runtime's events: relisting on change", "stream", w.Name())
			kick() // whatever changed before the stream opened
		}, func(id string, stopped bool) {
			if stopped {
				g.pending.add(id)
			}
			kick()
		})
		mu.Lock()
		over = true
		wasStreaming := g.streaming.Swap(false)
		mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrUnsupported) {
			logger.Info("The runtime has no such event stream; relisting periodically", "stream", w.Name(), "reason", err)
			watchers = watchers[1:]
			continue
		}
		if wasStreaming || g.cfg.Clock.Since(start) > time.Minute {
			delay = time.Second
			logger.Error(err, "The runtime's event stream broke; relisting periodically until it is back", "stream", w.Name())
		}
		select {
		case <-ctx.Done():
			return
		case <-g.cfg.Clock.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}
