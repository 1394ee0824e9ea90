package nodelet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/config"
	"github.com/nodelet/nodelet/internal/healthz"
	"github.com/nodelet/nodelet/internal/images"
	"github.com/nodelet/nodelet/internal/kuberuntime"
	"github.com/nodelet/nodelet/internal/pleg"
	"github.com/nodelet/nodelet/internal/podworkers"
	"github.com/nodelet/nodelet/internal/source/file"
	"github.com/nodelet/nodelet/internal/status"
	"github.com/nodelet/nodelet/internal/volumes"
)

// Timings of the loops beside the pod workers.
const (
	plegRelistPeriod   = time.Second
	housekeepingPeriod = 2 * time.Second
	// syncLoopUnhealthy: healthz fails when the main loop has not turned
	// for this long.
	syncLoopUnhealthy = 2 * time.Minute
)

// Nodelet is the node agent.
type Nodelet struct {
	opts     *config.Options
	clock    clock.WithTicker
	recorder record.EventRecorder
	hostIPs  []string

	runtime     *kuberuntime.Manager
	runtimeName string
	puller      *images.Puller
	pleg        *pleg.Generic
	workers     *podworkers.Workers
	statuses    *status.Store
	volumes     *volumes.Manager

	// The desired pods, by UID. Written only by the main loop.
	mu       sync.RWMutex
	pods     map[types.UID]*v1.Pod
	rejected map[types.UID]bool

	sourcesReady atomic.Bool
	lastLoop     atomic.Int64
	connected    atomic.Bool
}

// New returns a Nodelet for opts. It does not connect to anything yet.
func New(opts *config.Options) *Nodelet {
	scheme := runtime.NewScheme()
	_ = v1.AddToScheme(scheme)
	b := record.NewBroadcaster()
	b.StartStructuredLogging(0)
	return &Nodelet{
		opts:     opts,
		clock:    clock.RealClock{},
		recorder: b.NewRecorder(scheme, v1.EventSource{Component: "kubelet", Host: opts.NodeName}),
		statuses: status.NewStore(),
		volumes:  volumes.NewManager(filepath.Join(opts.RootDir, "pods")),
		pods:     map[types.UID]*v1.Pod{},
		rejected: map[types.UID]bool{},
	}
}

// Run runs the agent until ctx is done. Pods keep running after it returns,
// as with the upstream kubelet.
func (n *Nodelet) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	cfg := &n.opts.Config
	n.hostIPs = nodeIPs(n.opts.NodeIP)
	logger.Info("Starting nodelet", "node", n.opts.NodeName, "nodeIPs", n.hostIPs, "staticPodPath", cfg.StaticPodPath,
		"runtimeEndpoint", cfg.ContainerRuntimeEndpoint, "rootDir", n.opts.RootDir, "podLogsDir", cfg.PodLogsDir)
	if err := os.MkdirAll(filepath.Join(n.opts.RootDir, "pods"), 0o750); err != nil {
		return err
	}
	n.lastLoop.Store(n.clock.Now().UnixNano())

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	healthErr := make(chan error, 1)
	if *cfg.HealthzPort > 0 {
		addr := net.JoinHostPort(cfg.HealthzBindAddress, strconv.Itoa(int(*cfg.HealthzPort)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := healthz.Serve(ctx, addr, n.healthHandler()); err != nil {
				healthErr <- err
			}
		}()
	}

	rs, is, err := n.connect(ctx)
	if err != nil {
		return err
	}
	n.setup(ctx, rs, is)
	// Publishes the components set up above to the healthz handler.
	n.connected.Store(true)

	src := file.New(file.Config{Dir: cfg.StaticPodPath, NodeName: n.opts.NodeName, Period: cfg.FileCheckFrequency.Duration, Clock: n.clock})
	var updates <-chan []*v1.Pod
	if cfg.StaticPodPath != "" {
		wg.Add(1)
		go func() { defer wg.Done(); src.Run(ctx) }()
		updates = src.Updates()
	} else {
		n.sourcesReady.Store(true)
	}
	wg.Add(1)
	go func() { defer wg.Done(); n.pleg.Run(ctx) }()

	housekeeping := n.clock.NewTicker(housekeepingPeriod)
	defer housekeeping.Stop()
	for {
		n.lastLoop.Store(n.clock.Now().UnixNano())
		select {
		case <-ctx.Done():
			n.workers.Wait()
			return nil
		case err := <-healthErr:
			return err
		case pods := <-updates:
			n.applySource(ctx, pods)
			n.sourcesReady.Store(true)
		case e := <-n.pleg.Watch():
			n.workers.Notify(e.ID)
		case <-housekeeping.C():
			n.housekeeping(ctx)
		}
	}
}

// connect dials the CRI runtime, retrying until it answers: an unreachable
// runtime is reported (log, healthz) and waited for, never fatal.
func (n *Nodelet) connect(ctx context.Context) (internalapi.RuntimeService, internalapi.ImageManagerService, error) {
	logger := klog.FromContext(ctx)
	cfg := &n.opts.Config
	timeout := cfg.RuntimeRequestTimeout.Duration
	delay := time.Second
	for {
		rs, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(cfg.ContainerRuntimeEndpoint).
			WithConnectionTimeout(timeout).WithTracerProvider(nil).Build(ctx)
		if err == nil {
			var is internalapi.ImageManagerService
			is, err = remote.NewRemoteImageServiceBuilder().WithEndpoint(cfg.ImageServiceEndpoint).
				WithConnectionTimeout(timeout).WithTracerProvider(nil).Build(ctx)
			if err == nil {
				v, verr := rs.Version(ctx, "v1")
				if verr == nil {
					n.runtimeName = v.RuntimeName
					logger.Info("Connected to the container runtime", "runtime", v.RuntimeName, "version", v.RuntimeVersion, "criVersion", v.RuntimeApiVersion)
				}
				return rs, is, nil
			}
		}
		logger.Error(err, "Cannot reach the container runtime; retrying", "endpoint", cfg.ContainerRuntimeEndpoint, "retryIn", delay)
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-n.clock.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

func (n *Nodelet) setup(ctx context.Context, rs internalapi.RuntimeService, is internalapi.ImageManagerService) {
	cfg := &n.opts.Config
	n.puller = images.NewPuller(is, n.recorder, n.clock, *cfg.SerializeImagePulls)
	n.runtime = kuberuntime.NewManager(kuberuntime.Config{
		Runtime:    rs,
		Images:     n.puller,
		Recorder:   n.recorder,
		Clock:      n.clock,
		PodLogsDir: cfg.PodLogsDir,
		PodsDir:    filepath.Join(n.opts.RootDir, "pods"),
		DNS: kuberuntime.DNSConfig{
			ResolvConf:    *cfg.ResolverConfig,
			ClusterDNS:    cfg.ClusterDNS,
			ClusterDomain: cfg.ClusterDomain,
		},
		RuntimeRequestTimeout: cfg.RuntimeRequestTimeout.Duration,
	})
	n.pleg = pleg.New(pleg.Config{Lister: n.runtime, Period: plegRelistPeriod, Clock: n.clock})
	n.workers = podworkers.New(ctx, podworkers.Config{
		Syncer:       n,
		Clock:        n.clock,
		Resync:       cfg.SyncFrequency.Duration,
		OnTerminated: n.onTerminated,
	})
}

func (n *Nodelet) healthHandler() http.Handler {
	return healthz.Handler(
		healthz.Check{Name: "ping", Fn: func() error { return nil }},
		healthz.Check{Name: "runtime", Fn: func() error {
			if !n.connected.Load() {
				return errors.New("not connected to the container runtime")
			}
			if err := n.pleg.RuntimeError(); err != nil {
				return fmt.Errorf("container runtime not answering: %w", err)
			}
			return nil
		}},
		healthz.Check{Name: "pleg", Fn: func() error {
			if !n.connected.Load() {
				return nil // reported by the runtime check
			}
			return n.pleg.Healthy()
		}},
		healthz.Check{Name: "syncloop", Fn: func() error {
			last := time.Unix(0, n.lastLoop.Load())
			if since := n.clock.Since(last); since > syncLoopUnhealthy {
				return fmt.Errorf("sync loop last turned %v ago", since.Round(time.Second))
			}
			return nil
		}},
	)
}

// applySource makes the desired state the file source's latest pod set.
func (n *Nodelet) applySource(ctx context.Context, pods []*v1.Pod) {
	logger := klog.FromContext(ctx)
	next := make(map[types.UID]*v1.Pod, len(pods))
	for _, p := range pods {
		next[p.UID] = p
	}
	n.mu.Lock()
	old := n.pods
	var added, updated []*v1.Pod
	var removed []*v1.Pod
	for uid, p := range next {
		if o, ok := old[uid]; !ok {
			added = append(added, p)
		} else if o.ResourceVersion != p.ResourceVersion || !podsSemanticEqual(o, p) {
			updated = append(updated, p)
		}
	}
	for uid, p := range old {
		if _, ok := next[uid]; !ok {
			removed = append(removed, p)
			delete(n.rejected, uid)
		}
	}
	n.pods = next
	n.mu.Unlock()

	for _, p := range removed {
		logger.Info("Pod removed from its source; terminating it", "pod", klog.KObj(p), "podUID", p.UID)
		n.workers.Terminate(p.UID, p, nil, nil)
	}
	for _, p := range added {
		if reason, msg, ok := n.admit(p); !ok {
			logger.Info("Pod rejected", "pod", klog.KObj(p), "reason", reason, "message", msg)
			n.recorder.Event(p, v1.EventTypeWarning, reason, msg)
			n.statuses.Set(p, v1.PodStatus{Phase: v1.PodFailed, Reason: reason, Message: msg})
			n.mu.Lock()
			n.rejected[p.UID] = true
			n.mu.Unlock()
			continue
		}
		logger.Info("Pod added", "pod", klog.KObj(p), "podUID", p.UID)
		// The same UID may have run and finished before (a manifest removed
		// and put back).
		n.workers.Forget(p.UID)
		n.workers.Sync(p)
	}
	for _, p := range updated {
		n.mu.RLock()
		rej := n.rejected[p.UID]
		n.mu.RUnlock()
		if !rej {
			n.workers.Sync(p)
		}
	}
}

// admit applies the node's admission rules to a new pod.
func (n *Nodelet) admit(pod *v1.Pod) (string, string, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	active := 0
	for uid := range n.pods {
		if uid != pod.UID && !n.rejected[uid] {
			active++
		}
	}
	if max := int(n.opts.Config.MaxPods); active >= max {
		return "OutOfpods", fmt.Sprintf("Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", active, max), false
	}
	return "", "", true
}

// desired returns the desired pod with uid.
func (n *Nodelet) desired(uid types.UID) (*v1.Pod, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	p, ok := n.pods[uid]
	return p, ok && !n.rejected[uid]
}

func (n *Nodelet) onTerminated(uid types.UID) {
	// The same pod may have come back while it was terminating. Otherwise
	// the worker's memory of the finished pod stays until housekeeping sees
	// the runtime no longer has it, so a stale relist cannot start a second
	// termination.
	if p, ok := n.desired(uid); ok {
		n.workers.Forget(uid)
		n.workers.Sync(p)
	}
}

// housekeeping stops runtime pods nobody wants and removes directories of
// pods that are gone. It waits for every source to have been seen, so pods
// are never killed just because their source is slow at start.
func (n *Nodelet) housekeeping(ctx context.Context) {
	if !n.sourcesReady.Load() {
		return
	}
	running, ok := n.pleg.RunningPods()
	if !ok {
		return
	}
	logger := klog.FromContext(ctx)
	inRuntime := map[types.UID]bool{}
	for _, rp := range running {
		inRuntime[rp.UID] = true
		if _, want := n.desired(rp.UID); want || n.workers.Has(rp.UID) {
			continue
		}
		logger.Info("Found a pod in the runtime that is not desired; terminating it", "pod", klog.KRef(rp.Namespace, rp.Name), "podUID", rp.UID)
		n.workers.Terminate(rp.UID, nil, rp, nil)
	}
	for _, uid := range n.workers.Finished() {
		if !inRuntime[uid] {
			n.workers.Forget(uid)
		}
	}
	// Directories of pods that are gone.
	if uids, err := n.volumes.PodUIDs(); err == nil {
		for _, uid := range uids {
			if _, want := n.desired(uid); want || inRuntime[uid] || n.workers.Has(uid) {
				continue
			}
			if err := n.volumes.Teardown(uid); err != nil {
				logger.Error(err, "Cannot remove the directory of a removed pod", "podUID", uid)
			} else {
				logger.V(2).Info("Removed the directory of a removed pod", "podUID", uid)
			}
		}
	}
	n.cleanLogDirs(ctx, inRuntime)
	n.runtime.GCBackoff()
}

// cleanLogDirs removes <podLogsDir>/<ns>_<name>_<uid> of pods that are gone.
func (n *Nodelet) cleanLogDirs(ctx context.Context, inRuntime map[types.UID]bool) {
	entries, err := os.ReadDir(n.opts.Config.PodLogsDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		parts := strings.Split(e.Name(), "_")
		if !e.IsDir() || len(parts) != 3 {
			continue
		}
		uid := types.UID(parts[2])
		if _, want := n.desired(uid); want || inRuntime[uid] || n.workers.Has(uid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(n.opts.Config.PodLogsDir, e.Name())); err == nil {
			klog.FromContext(ctx).V(2).Info("Removed the logs of a removed pod", "podUID", uid)
		}
	}
}

// nodeIPs is --node-ip, or the first global unicast IPv4 address of an
// interface that is up.
func nodeIPs(flag string) []string {
	if flag != "" {
		return strings.Split(flag, ",")
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return []string{ipn.IP.String()}
			}
		}
	}
	return nil
}
