package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Loop is one of nodelet's loops.
type Loop struct {
	// Name names the loop in logs and errors ("pleg", "kubelet-api").
	Name string
	// Run runs the loop until ctx is done; it returns nil then. Returning
	// nil before is a loop that finished its work (it is not run again);
	// an error is a failure.
	Run func(ctx context.Context) error
	// Fatal: a failure stops nodelet (Fatal delivers it) instead of the
	// loop being run again after a back-off. For loops without which the
	// node must not go on (the health endpoint the supervisor watches).
	Fatal bool
}

// Default back-off of a failed non-fatal loop: 1 s doubling up to 1 minute;
// a loop that ran for longer than the maximum before failing starts again
// from the initial delay.
const (
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = time.Minute
)

// Config is a Group's configuration.
type Config struct {
	// Clock times the back-offs; the real clock when nil.
	Clock clock.WithTicker
	// InitialBackoff and MaxBackoff bound the delay before a failed
	// non-fatal loop runs again (DefaultInitialBackoff, DefaultMaxBackoff
	// when zero).
	InitialBackoff, MaxBackoff time.Duration
}

// Group runs loops. Safe for concurrent use.
type Group struct {
	cfg Config
	// done is closed at the first fatal error, err.
	done     chan struct{}
	doneOnce sync.Once
	err      error

	mu      sync.Mutex
	running []*running
	stopped bool
}

type running struct {
	loop   Loop
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns an empty Group.
func New(cfg Config) (*Group, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.InitialBackoff <= 0 {
		cfg.InitialBackoff = DefaultInitialBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MaxBackoff < cfg.InitialBackoff {
		return nil, fmt.Errorf("lifecycle: MaxBackoff %v is shorter than InitialBackoff %v", cfg.MaxBackoff, cfg.InitialBackoff)
	}
	return &Group{cfg: cfg, done: make(chan struct{})}, nil
}

// Start starts loops, in order. Each runs with a context of its own that
// carries ctx's values (its logger) but is cancelled only by Stop: a
// cancelled ctx does not stop the loops, so Stop can stop them in order.
// Loops given after Stop are not started.
func (g *Group) Start(ctx context.Context, loops ...Loop) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return errors.New("lifecycle: the group is stopped")
	}
	for _, l := range loops {
		if l.Name == "" || l.Run == nil {
			return fmt.Errorf("lifecycle: loop %q has no name or no Run", l.Name)
		}
	}
	base := context.WithoutCancel(ctx)
	for _, l := range loops {
		lctx, cancel := context.WithCancel(klog.NewContext(base, klog.FromContext(base).WithValues("loop", l.Name)))
		r := &running{loop: l, cancel: cancel, done: make(chan struct{})}
		g.running = append(g.running, r)
		go g.run(lctx, r)
	}
	return nil
}

// run runs one loop until its context is done, running it again after a
// failure unless the loop is fatal.
func (g *Group) run(ctx context.Context, r *running) {
	defer close(r.done)
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Starting loop")
	delay := g.cfg.InitialBackoff
	for {
		started := g.cfg.Clock.Now()
		err := r.loop.Run(ctx)
		if ctx.Err() != nil {
			logger.V(2).Info("Loop stopped")
			return
		}
		if err == nil {
			logger.V(2).Info("Loop finished")
			return
		}
		if r.loop.Fatal {
			logger.Error(err, "Loop failed; stopping nodelet")
			g.doneOnce.Do(func() {
				g.err = fmt.Errorf("%s: %w", r.loop.Name, err)
				close(g.done)
			})
			return
		}
		if g.cfg.Clock.Since(started) > g.cfg.MaxBackoff {
			delay = g.cfg.InitialBackoff
		}
		logger.Error(err, "Loop failed; running it again", "retryIn", delay)
		select {
		case <-ctx.Done():
			return
		case <-g.cfg.Clock.After(delay):
		}
		delay = min(2*delay, g.cfg.MaxBackoff)
	}
}

// Done is closed when a fatal loop failed; Err then says which and why.
func (g *Group) Done() <-chan struct{} { return g.done }

// Err is the first failure of a fatal loop, named by the loop; nil while
// Done is open.
func (g *Group) Err() error {
	select {
	case <-g.done:
		return g.err
	default:
		return nil
	}
}

// Stop stops the loops in the reverse order of their start, waiting for
// each to return before stopping the one started before it, so a loop
// never outlives what it was started after. Safe to call more than once.
func (g *Group) Stop() {
	g.mu.Lock()
	g.stopped = true
	loops := g.running
	g.running = nil
	g.mu.Unlock()
	for i := len(loops) - 1; i >= 0; i-- {
		loops[i].cancel()
		<-loops[i].done
	}
}

// Ready is a ready channel a producer offers: closed once, by Close, when
// what it guards is usable. The zero value is ready to use.
type Ready struct {
	once sync.Once
	mu   sync.Mutex
	ch   chan struct{}
}

func (r *Ready) chanLocked() chan struct{} {
	if r.ch == nil {
		r.ch = make(chan struct{})
	}
	return r.ch
}

// C is closed once Close was called.
func (r *Ready) C() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.chanLocked()
}

// Close marks it ready; later calls do nothing.
func (r *Ready) Close() {
	r.once.Do(func() {
		r.mu.Lock()
		close(r.chanLocked())
		r.mu.Unlock()
	})
}

// IsReady reports whether Close was called.
func (r *Ready) IsReady() bool {
	select {
	case <-r.C():
		return true
	default:
		return false
	}
}
