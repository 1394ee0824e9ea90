package shutdown

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/metrics"
)

// StateFile is the file under the root directory keeping the last
// shutdown's start and end times, as upstream.
const StateFile = "graceful_node_shutdown_state"

// ReasonNodeShutdown is the node event of a shutdown and of its
// cancellation, as upstream.
const ReasonNodeShutdown = "NodeShutdown"

// Stopper stops pods for the shutdown: the pod workers.
type Stopper interface {
	// Stop asks for the pod to stop within grace seconds, its status
	// changed by status.
	Stop(pod *v1.Pod, grace int64, status func(*v1.PodStatus))
	// Stopped reports whether a pod given to Stop has its containers
	// stopped.
	Stopped(uid types.UID) bool
}

// Config configures a Manager.
type Config struct {
	// Periods are the priority bands (Periods); required.
	Periods []kubeletv1beta1.ShutdownGracePeriodByPodPriority
	// Connect reaches logind; ConnectLogind when nil.
	Connect func() (Logind, error)
	// ActivePods are the pods that may be running; required.
	ActivePods func() []*v1.Pod
	// Stopper stops them; required.
	Stopper Stopper
	// NodeChanged is called when ShuttingDown changes, so that the node's
	// status is reported at once.
	NodeChanged func()
	// Recorder and Node: the node events; Recorder required.
	Recorder record.EventRecorder
	Node     *v1.ObjectReference
	// StateFile keeps the last shutdown's times ("": none).
	StateFile string
	Clock     clock.WithTicker
	// PollPeriod is how often the pods being stopped are checked (100 ms);
	// ReconnectPeriod the first wait before reaching logind again after it
	// went away or could not be reached (1 s, doubling up to 30 s).
	PollPeriod      time.Duration
	ReconnectPeriod time.Duration
}

// Manager takes logind's delay lock and stops the pods, by priority group,
// when logind says the machine shuts down.
type Manager struct {
	cfg          Config
	shuttingDown atomic.Bool

	// Owned by Run; kept across reconnections to logind, so that a bus
	// that goes away neither ends a shutdown under way nor lets go of the
	// lock before the pods are stopped.
	lock *os.File
	proc *processing
}

// New returns a Manager for cfg. It fails without Periods, ActivePods,
// Stopper or Recorder.
func New(cfg Config) (*Manager, error) {
	switch {
	case len(cfg.Periods) == 0:
		return nil, errors.New("shutdown: Config.Periods is required")
	case cfg.ActivePods == nil:
		return nil, errors.New("shutdown: Config.ActivePods is required")
	case cfg.Stopper == nil:
		return nil, errors.New("shutdown: Config.Stopper is required")
	case cfg.Recorder == nil:
		return nil, errors.New("shutdown: Config.Recorder is required")
	}
	if cfg.Connect == nil {
		cfg.Connect = func() (Logind, error) { return ConnectLogind() }
	}
	if cfg.NodeChanged == nil {
		cfg.NodeChanged = func() {}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.PollPeriod <= 0 {
		cfg.PollPeriod = 100 * time.Millisecond
	}
	if cfg.ReconnectPeriod <= 0 {
		cfg.ReconnectPeriod = time.Second
	}
	return &Manager{cfg: cfg}, nil
}

// ShuttingDown is upstream's ShutdownStatus: an error, which makes the node
// not ready, while the node shuts down.
func (m *Manager) ShuttingDown() error {
	if m.shuttingDown.Load() {
		return errors.New(NotReadyMessage)
	}
	return nil
}

// Admit refuses pods while the node shuts down.
func (m *Manager) Admit(context.Context, admission.Attributes) admission.Result {
	if m.shuttingDown.Load() {
		return admission.Result{Reason: AdmissionReason, Message: AdmissionMessage}
	}
	return admission.Result{Admit: true}
}

// Run watches for shutdowns until ctx is done, reaching logind again
// whenever it goes away. Without logind, graceful shutdown is off and
// nodelet carries on.
func (m *Manager) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	logger.Info("Creating node shutdown manager", "shutdownGracePeriodRequested", Requested(m.cfg.Periods),
		"shutdownGracePeriodByPodPriority", m.cfg.Periods)
	m.loadMetrics(logger)
	defer func() {
		m.stopProcessing()
		m.release()
	}()
	wait := m.cfg.ReconnectPeriod
	for failures := 0; ; failures++ {
		watched, err := m.watch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if watched {
			failures, wait = 0, m.cfg.ReconnectPeriod
			logger.Info("Lost the watch for node shutdown events; reaching logind again", "err", err)
		} else if failures == 0 {
			logger.Error(err, "Failed to start node shutdown manager: graceful node shutdown is off until logind answers")
		} else {
			logger.V(2).Info("Logind still unreachable", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-m.cfg.Clock.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// watch takes the lock and handles PrepareForShutdown until the connection
// or ctx ends; watched tells whether it got that far.
func (m *Manager) watch(ctx context.Context) (watched bool, err error) {
	logger := klog.FromContext(ctx)
	l, err := m.cfg.Connect()
	if err != nil {
		return false, err
	}
	defer l.Close()
	// Subscribed first: no signal is lost between the lock and the watch.
	events, err := l.PrepareForShutdown()
	if err != nil {
		return false, fmt.Errorf("failed to monitor shutdown: %w", err)
	}
	if err := m.ensureInhibitDelay(ctx, l); err != nil {
		return false, err
	}
	if m.lock == nil && !m.shuttingDown.Load() {
		if m.lock, err = l.Inhibit(); err != nil {
			return false, err
		}
	}
	logger.Info("Watching the node for shutdown events", "inhibitLock", "delay")
	// What happened while nodelet could not hear it (a reconnection).
	if preparing, err := l.PreparingForShutdown(); err != nil {
		logger.V(2).Info("Cannot read logind's PreparingForShutdown", "err", err)
	} else if preparing != m.shuttingDown.Load() && (preparing || m.lock == nil) {
		if err := m.handle(ctx, l, preparing); err != nil {
			return true, err
		}
	}
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case <-m.processed():
			// Every group is stopped: let the shutdown go on.
			m.proc.cancel()
			m.proc = nil
			m.release()
			logger.Info("Shutdown manager completed processing shutdown event, node will shutdown shortly")
		case shutdown, ok := <-events:
			if !ok {
				return true, errors.New("the system bus connection ended")
			}
			if err := m.handle(ctx, l, shutdown); err != nil {
				return true, err
			}
		}
	}
}

// handle is a PrepareForShutdown(shutdown): a shutdown starts, or the one
// under way is cancelled (what is left of it is not done, the lock taken
// again).
func (m *Manager) handle(ctx context.Context, l Logind, shutdown bool) error {
	logger := klog.FromContext(ctx)
	if shutdown == m.shuttingDown.Load() {
		return nil
	}
	if shutdown {
		logger.Info("Shutdown manager detected new shutdown event")
		m.cfg.Recorder.Event(m.cfg.Node, v1.EventTypeNormal, ReasonNodeShutdown, "Shutdown manager detected shutdown event")
		m.shuttingDown.Store(true)
		m.cfg.NodeChanged()
		m.proc = m.start(ctx)
		return nil
	}
	logger.Info("Shutdown manager detected shutdown cancellation")
	m.cfg.Recorder.Event(m.cfg.Node, v1.EventTypeNormal, ReasonNodeShutdown, "Shutdown manager detected shutdown cancellation")
	m.stopProcessing()
	m.shuttingDown.Store(false)
	m.cfg.NodeChanged()
	if m.lock == nil {
		var err error
		if m.lock, err = l.Inhibit(); err != nil {
			return err
		}
	}
	return nil
}

// processed is closed when the shutdown under way is done (nil: none).
func (m *Manager) processed() <-chan struct{} {
	if m.proc == nil {
		return nil
	}
	return m.proc.done
}

// stopProcessing cancels the shutdown under way and waits for it.
func (m *Manager) stopProcessing() {
	if m.proc != nil {
		m.proc.cancel()
		<-m.proc.done
		m.proc = nil
	}
}

// release lets go of the lock.
func (m *Manager) release() {
	if m.lock != nil {
		_ = m.lock.Close()
		m.lock = nil
	}
}

// processing is a shutdown being processed: cancel stops it, done is
// closed when it returns.
type processing struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// start processes the shutdown in the background.
func (m *Manager) start(ctx context.Context) *processing {
	ctx, cancel := context.WithCancel(ctx)
	p := &processing{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		m.process(ctx)
	}()
	return p
}

// ensureInhibitDelay raises logind's InhibitDelayMaxSec when it is below
// the time asked for, as upstream.
func (m *Manager) ensureInhibitDelay(ctx context.Context, l Logind) error {
	current, err := l.InhibitDelay()
	if err != nil {
		return err
	}
	requested := Requested(m.cfg.Periods)
	if requested <= current {
		return nil
	}
	if err := l.RaiseInhibitDelay(requested); err != nil {
		return fmt.Errorf("unable to override inhibit delay by shutdown manager: %w", err)
	}
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		if current, err = l.InhibitDelay(); err != nil {
			return err
		}
		if current >= requested {
			return nil
		}
		if attempt == 5 {
			return fmt.Errorf("node shutdown manager was timed out after %d attempts waiting for logind InhibitDelayMaxSec to update to %v (ShutdownGracePeriod), current value is %v", attempt, requested, current)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.cfg.Clock.After(wait):
		}
		wait *= 2
	}
}

// process stops the active pods group by group, lowest priority first,
// each group given its period, until all are done or ctx is cancelled.
func (m *Manager) process(ctx context.Context) {
	logger := klog.FromContext(ctx)
	start := m.cfg.Clock.Now()
	m.record(logger, start, time.Time{})
	defer func() { m.record(logger, start, m.cfg.Clock.Now()) }()
	for _, g := range GroupByPriority(m.cfg.Periods, m.cfg.ActivePods()) {
		if ctx.Err() != nil {
			logger.Info("Shutdown cancelled; the remaining pods keep running")
			return
		}
		if len(g.Pods) == 0 {
			continue
		}
		for _, p := range g.Pods {
			grace := PodGracePeriod(p, g)
			logger.V(1).Info("Shutdown manager killing pod with gracePeriod", "pod", klog.KObj(p), "gracePeriod", grace)
			m.cfg.Stopper.Stop(p, grace, func(st *v1.PodStatus) { SetStatus(st, p.Generation, m.cfg.Clock.Now()) })
		}
		stopped := m.waitStopped(ctx, g)
		logger.Info("Shutdown priority group done", "priority", g.Priority, "gracePeriod", g.ShutdownGracePeriodSeconds,
			"pods", len(g.Pods), "allStopped", stopped, "sinceShutdown", m.cfg.Clock.Since(start).Round(time.Millisecond))
	}
}

// waitStopped waits until the group's pods are stopped, its period passed
// or ctx is done; it tells whether they all stopped.
func (m *Manager) waitStopped(ctx context.Context, g Group) bool {
	timer := m.cfg.Clock.NewTimer(time.Duration(g.ShutdownGracePeriodSeconds) * time.Second)
	defer timer.Stop()
	tick := m.cfg.Clock.NewTicker(m.cfg.PollPeriod)
	defer tick.Stop()
	for {
		all := true
		for _, p := range g.Pods {
			all = all && m.cfg.Stopper.Stopped(p.UID)
		}
		if all {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-timer.C():
			return false
		case <-tick.C():
		}
	}
}

// state is the state file's content, as upstream's.
type state struct {
	StartTime time.Time `json:"startTime"`
	EndTime   time.Time `json:"endTime"`
}

// record sets the metrics and the state file: end zero while it runs.
func (m *Manager) record(logger klog.Logger, start, end time.Time) {
	metrics.GracefulShutdownStartTime.Set(seconds(start))
	metrics.GracefulShutdownEndTime.Set(seconds(end))
	if m.cfg.StateFile == "" {
		return
	}
	b, _ := json.Marshal(state{StartTime: start, EndTime: end})
	if err := writeSynced(m.cfg.StateFile, b); err != nil {
		logger.Error(err, "Failed to store graceful shutdown state")
	}
}

// writeSynced replaces path with data, synced to disk (the end time is
// written just before the machine goes down), as upstream's atomicWrite.
func writeSynced(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// loadMetrics sets the metrics from the last shutdown's state.
func (m *Manager) loadMetrics(logger klog.Logger) {
	if m.cfg.StateFile == "" {
		return
	}
	b, err := os.ReadFile(m.cfg.StateFile)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var st state
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		logger.Error(err, "Failed to load graceful shutdown state")
		return
	}
	metrics.GracefulShutdownStartTime.Set(seconds(st.StartTime))
	metrics.GracefulShutdownEndTime.Set(seconds(st.EndTime))
}

func seconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.Unix())
}
