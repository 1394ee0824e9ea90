package podworkers

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/kubecontainer"
)

// Syncer does the work for one pod.
type Syncer interface {
	// SyncPod makes the pod run as specified. It returns when it wants the
	// next sync at the latest (0: the resync period).
	SyncPod(ctx context.Context, pod *v1.Pod) (time.Duration, error)
	// StopPod stops the pod's containers and sandboxes within the grace
	// period (pod may be nil for a pod only the runtime knows, then running
	// is set).
	StopPod(ctx context.Context, pod *v1.Pod, running *kubecontainer.RunningPod, gracePeriod *int64) error
	// CleanupPod removes what is left of a stopped pod: its final status
	// and API object, its containers, sandboxes and volumes. restarting:
	// the same pod (a static pod's manifest removed and put back) was
	// added again while it terminated and runs again next, so what its
	// restart builds on stays, as upstream's restartRequested: its stopped
	// containers and sandboxes (the next ones count on from them), their
	// logs, its mirror pod.
	CleanupPod(ctx context.Context, pod *v1.Pod, running *kubecontainer.RunningPod, restarting bool) error
}

// firstErrorDelay is the first retry after a failed sync, doubling up to a
// minute. Short: the usual first failure is a race that settles within
// milliseconds (a service account token refused until the API server's node
// authorizer has seen the pod's binding).
const firstErrorDelay = 200 * time.Millisecond

// Config configures Workers.
type Config struct {
	// Context bounds the workers: their goroutines and the syncs they run
	// end when it is done, and no worker starts after. The workers log to
	// its logger.
	Context context.Context
	// Syncer does the work for each pod.
	Syncer Syncer
	// Clock times the resyncs (the real clock when nil).
	Clock clock.Clock
	// Resync is the longest time between two syncs of a pod (syncFrequency).
	Resync time.Duration
	// OnTerminated is called once a pod's termination finished.
	OnTerminated func(uid types.UID)
}

// Workers manages one worker per pod.
type Workers struct {
	cfg     Config
	ctx     context.Context
	mu      sync.Mutex
	workers map[types.UID]*worker
	done    map[types.UID]bool
	wg      sync.WaitGroup
}

type worker struct {
	uid  types.UID
	wake chan struct{}

	mu          sync.Mutex
	pod         *v1.Pod
	running     *kubecontainer.RunningPod
	terminate   bool
	gracePeriod *int64
	// stopping: StopPod is in flight; a shorter grace period restarts it.
	// Once the pod is stopped, its cleanup is never cut short by a new
	// grace period (the API's own deletion of the pod, which sets the
	// grace to 0, would otherwise cancel the very delete call causing it).
	stopping bool
	// readded: the pod was added again while terminating (Readded).
	readded bool
	cancel  context.CancelFunc // of the in-flight sync or stop
}

// New returns Workers for cfg, whose goroutines live until cfg.Context is
// done. It fails when cfg has no Context or Syncer.
func New(cfg Config) (*Workers, error) {
	switch {
	case cfg.Context == nil:
		return nil, errors.New("podworkers: Config.Context is required")
	case cfg.Syncer == nil:
		return nil, errors.New("podworkers: Config.Syncer is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Workers{cfg: cfg, ctx: cfg.Context, workers: map[types.UID]*worker{}, done: map[types.UID]bool{}}, nil
}

// Sync hands the worker of pod its latest spec and wakes it, starting the
// worker if needed.
func (ws *Workers) Sync(pod *v1.Pod) {
	w := ws.get(pod.UID, true)
	if w == nil {
		return
	}
	w.mu.Lock()
	if !w.terminate {
		w.pod = pod
	}
	w.mu.Unlock()
	w.poke()
}

// Terminate asks the pod's worker to stop the pod. pod or running says what
// to stop; gracePeriod overrides the pod's own when not nil.
func (ws *Workers) Terminate(uid types.UID, pod *v1.Pod, running *kubecontainer.RunningPod, gracePeriod *int64) {
	w := ws.get(uid, true)
	if w == nil {
		return
	}
	w.mu.Lock()
	if pod != nil {
		w.pod = pod
	}
	if running != nil {
		w.running = running
	}
	shorter := gracePeriod != nil &&
		kubecontainer.GracePeriod(w.pod, w.running, gracePeriod) < kubecontainer.GracePeriod(w.pod, w.running, w.gracePeriod)
	if shorter {
		w.gracePeriod = gracePeriod
	}
	// A sync in flight is cut short; a termination in flight goes on
	// unless the grace period got shorter (restarting it would stop the
	// containers again and wait out their grace period a second time).
	switch {
	case w.cancel == nil:
	case !w.terminate:
		w.cancel()
	case shorter && w.stopping:
		klog.FromContext(ws.ctx).Info("Restarting the pod's termination with a shorter grace period", "podUID", uid, "gracePeriod", kubecontainer.GracePeriod(w.pod, w.running, gracePeriod))
		w.cancel()
	}
	w.terminate = true
	// Wanted no more, even if it had been added back meanwhile.
	w.readded = false
	w.mu.Unlock()
	w.poke()
}

// Readded tells a terminating pod's worker that the pod was added again
// (same UID): it finishes terminating, keeps what the restart builds on,
// and the pod runs again once OnTerminated is called. It reports whether
// the pod was terminating.
func (ws *Workers) Readded(uid types.UID) bool {
	w := ws.get(uid, false)
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.terminate {
		w.readded = true
	}
	return w.terminate
}

// Notify wakes the pod's worker, if it has one (a PLEG event).
func (ws *Workers) Notify(uid types.UID) {
	if w := ws.get(uid, false); w != nil {
		w.poke()
	}
}

// Interrupt wakes the pod's worker, cutting a sync in flight short (an
// image pull, a volume's setup) so that its next sync starts at once: the
// node stops the pod (an eviction, a shutdown). A termination in flight
// goes on.
func (ws *Workers) Interrupt(uid types.UID) {
	w := ws.get(uid, false)
	if w == nil {
		return
	}
	w.mu.Lock()
	if w.cancel != nil && !w.terminate {
		w.cancel()
	}
	w.mu.Unlock()
	w.poke()
}

// Live reports whether the pod has a worker that has not finished.
func (ws *Workers) Live(uid types.UID) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.workers[uid] != nil
}

// Has reports whether the pod has a live worker or finished terminating.
func (ws *Workers) Has(uid types.UID) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.workers[uid] != nil || ws.done[uid]
}

// Terminating reports whether the pod has a worker that is terminating it.
func (ws *Workers) Terminating(uid types.UID) bool {
	w := ws.get(uid, false)
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.terminate
}

// Forget drops the memory of a finished pod, so its UID may run again.
func (ws *Workers) Forget(uid types.UID) {
	ws.mu.Lock()
	delete(ws.done, uid)
	ws.mu.Unlock()
}

// Finished lists the pods that finished terminating and are not forgotten.
func (ws *Workers) Finished() []types.UID {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := make([]types.UID, 0, len(ws.done))
	for uid := range ws.done {
		out = append(out, uid)
	}
	return out
}

// Count is the number of live workers.
func (ws *Workers) Count() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.workers)
}

// Wait blocks until every worker goroutine has exited (after ctx is done).
func (ws *Workers) Wait() { ws.wg.Wait() }

func (ws *Workers) get(uid types.UID, create bool) *worker {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.workers[uid]; w != nil {
		return w
	}
	if !create || ws.done[uid] || ws.ctx.Err() != nil {
		return nil
	}
	w := &worker{uid: uid, wake: make(chan struct{}, 1)}
	ws.workers[uid] = w
	ws.wg.Add(1)
	go ws.run(w)
	return w
}

func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (ws *Workers) run(w *worker) {
	defer ws.wg.Done()
	logger := klog.FromContext(ws.ctx).WithValues("podUID", w.uid)
	timer := ws.cfg.Clock.NewTimer(ws.cfg.Resync)
	defer timer.Stop()
	errDelay := time.Duration(0)
	for {
		select {
		case <-ws.ctx.Done():
			return
		case <-w.wake:
		case <-timer.C():
		}
		w.mu.Lock()
		pod, running, terminate, grace := w.pod, w.running, w.terminate, w.gracePeriod
		ctx, cancel := context.WithCancel(ws.ctx)
		w.cancel = cancel
		w.stopping = terminate
		w.mu.Unlock()

		var next time.Duration
		var err error
		if terminate {
			if err = ws.cfg.Syncer.StopPod(ctx, pod, running, grace); err == nil {
				w.mu.Lock()
				w.stopping = false
				readded := w.readded
				w.mu.Unlock()
				err = ws.cfg.Syncer.CleanupPod(ctx, pod, running, readded)
			}
			cancel()
			if err == nil {
				ws.finish(w)
				return
			}
			logger.Error(err, "Failed to terminate pod; will retry")
		} else if pod != nil {
			next, err = ws.cfg.Syncer.SyncPod(ctx, pod)
			cancel()
			if err != nil && ctx.Err() == nil {
				logger.Error(err, "Failed to sync pod; will retry", "pod", klog.KObj(pod))
			}
		} else {
			cancel()
		}
		if err != nil {
			errDelay = min(max(2*errDelay, firstErrorDelay), time.Minute)
			next = errDelay
		} else {
			errDelay = 0
		}
		if next <= 0 || next > ws.cfg.Resync {
			// Jitter the periodic resync so pods spread out.
			next = ws.cfg.Resync + time.Duration(rand.Int64N(int64(ws.cfg.Resync)/10+1))
		}
		if !timer.Stop() {
			select {
			case <-timer.C():
			default:
			}
		}
		timer.Reset(next)
	}
}

func (ws *Workers) finish(w *worker) {
	ws.mu.Lock()
	delete(ws.workers, w.uid)
	ws.done[w.uid] = true
	ws.mu.Unlock()
	if ws.cfg.OnTerminated != nil {
		ws.cfg.OnTerminated(w.uid)
	}
}
