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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	clientcertificate "k8s.io/client-go/util/certificate"
	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/apiutil"
	"github.com/nodelet/nodelet/internal/cgroups"
	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/config"
	"github.com/nodelet/nodelet/internal/csi"
	"github.com/nodelet/nodelet/internal/devicemanager"
	"github.com/nodelet/nodelet/internal/events"
	"github.com/nodelet/nodelet/internal/eviction"
	"github.com/nodelet/nodelet/internal/healthz"
	"github.com/nodelet/nodelet/internal/imagegc"
	"github.com/nodelet/nodelet/internal/images"
	"github.com/nodelet/nodelet/internal/kuberuntime"
	"github.com/nodelet/nodelet/internal/machine"
	"github.com/nodelet/nodelet/internal/memtrim"
	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/mirror"
	"github.com/nodelet/nodelet/internal/nodestatus"
	"github.com/nodelet/nodelet/internal/pleg"
	"github.com/nodelet/nodelet/internal/podmanager"
	"github.com/nodelet/nodelet/internal/podsync"
	"github.com/nodelet/nodelet/internal/podworkers"
	"github.com/nodelet/nodelet/internal/prober"
	"github.com/nodelet/nodelet/internal/serviceenv"
	"github.com/nodelet/nodelet/internal/shutdown"
	"github.com/nodelet/nodelet/internal/source/apiserver"
	"github.com/nodelet/nodelet/internal/source/file"
	"github.com/nodelet/nodelet/internal/stats"
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

// Source names in the pod manager.
const (
	sourceFile = "file"
	sourceAPI  = "api"
)

// Nodelet is the node agent.
type Nodelet struct {
	opts     *config.Options
	clock    clock.WithTicker
	recorder record.EventRecorder
	// events are the pods' recent events (the recorder's), for the local
	// API's describe.
	events  *events.Store
	hostIPs []string
	// machine is the machine's facts, read once at Run's start, for cm,
	// nodestatus and stats.
	machine machine.Facts

	runtime     *kuberuntime.Manager
	runtimeName string
	puller      *images.Puller
	pleg        *pleg.Generic
	prober      *prober.Manager
	workers     *podworkers.Workers
	podsync     *podsync.Syncer
	pods        *podmanager.Manager
	statuses    *status.Store
	volumes     *volumes.Manager
	cgroups     *cgroups.Manager
	stats       *stats.Provider
	eviction    *eviction.Manager
	// shutdown is graceful node shutdown; nil when off.
	shutdown *shutdown.Manager
	// csiDrivers are the CSI drivers registered on the node.
	csiDrivers *csi.Drivers
	// csiVolumes is the CSI volume plugin (volumesInUse).
	csiVolumes *csi.VolumePlugin
	imageGC    *imagegc.Manager

	// Cluster mode only (nil standalone).
	client     kubernetes.Interface
	apiSource  *apiserver.Source
	nodeStatus *nodestatus.Manager
	mirrors    *mirror.Manager
	syncer     *status.Syncer
	apiGetter  *volumes.APIGetter
	// objects reads ConfigMaps, Secrets and tokens (and forgets a removed
	// pod's): apiGetter, or the offline checkpoint's read-through getter
	// over it when offline autonomy is on.
	objects checkpoint.API
	// offline keeps the checkpoint of the API pods (offline autonomy); nil
	// when off or standalone.
	offline *checkpoint.Manager
	// contact follows whether the API server answers.
	contact *apiutil.Contact
	// serviceSource is the Service informer of container environments.
	serviceSource *serviceenv.Source

	// pendingAdmission holds pods that wait for the Node to be registered.
	// Owned by the main loop.
	pendingAdmission []*v1.Pod
	// clientCerts and servingCerts rotate the client and serving
	// certificates (rotateCertificates, serverTLSBootstrap); nil otherwise.
	clientCerts, servingCerts clientcertificate.Manager
	// restBase is the API clients' base configuration (clientConfig).
	restBase *rest.Config
	// sysctls is the node's sysctl allowlist (safe and allowedUnsafeSysctls).
	sysctls *admission.Sysctls
	// devices runs the device plugins.
	devices *devicemanager.Manager

	// machineAlloc is the machine's allocatable, computed once (standalone
	// mode has no Node to read it from).
	machineOnce  sync.Once
	machineAlloc v1.ResourceList

	sourcesSeen  map[string]bool // owned by the main loop
	sourcesReady atomic.Bool
	lastLoop     atomic.Int64
	connected    atomic.Bool
}

// New returns a Nodelet for opts. It does not connect to anything yet,
// except for TLS bootstrap (--bootstrap-kubeconfig without
// rotateCertificates), which waits for the client certificate.
func New(ctx context.Context, opts *config.Options) (*Nodelet, error) {
	n := &Nodelet{
		opts:     opts,
		clock:    clock.RealClock{},
		statuses: status.NewStore(),
		pods:     podmanager.New(),

		sourcesSeen: map[string]bool{},
	}
	n.contact = apiutil.NewContact(n.clock)
	var eventClient kubernetes.Interface
	if opts.KubeconfigPath != "" {
		base, err := n.clientConfig(ctx)
		if err != nil {
			return nil, err
		}
		n.restBase = base
		if n.client, err = newClient(opts, base, n.contact); err != nil {
			return nil, err
		}
		if eventClient, err = newEventClient(opts, base); err != nil {
			return nil, err
		}
	}
	n.events = events.New()
	n.recorder = newRecorder(eventClient, opts.NodeName, n.events)
	sysctls, err := admission.NewSysctls(opts.Config.AllowedUnsafeSysctls)
	if err != nil {
		return nil, fmt.Errorf("allowedUnsafeSysctls: %w", err)
	}
	n.sysctls = sysctls
	n.csiDrivers = &csi.Drivers{}
	var getter volumes.Getter
	if n.client != nil {
		// ConfigMaps and Secrets are re-read at most every syncFrequency
		// (and every minute at most): an update reaches running pods'
		// files within syncFrequency plus this TTL.
		g, err := volumes.NewAPIGetter(volumes.APIGetterConfig{
			Client: n.client, Clock: n.clock, TTL: min(time.Minute, opts.Config.SyncFrequency.Duration),
		})
		if err != nil {
			return nil, err
		}
		n.apiGetter = g
		n.objects = g
		if opts.Offline.Autonomy {
			if err := n.newOffline(); err != nil {
				return nil, err
			}
		}
		getter = n.objects
	}
	// The node's allocatable: for downwardAPI resourceFieldRef limits a
	// container does not set.
	vols, err := volumes.New(volumes.ManagerConfig{
		PodsDir: filepath.Join(opts.RootDir, "pods"), Getter: getter, Allocatable: n.allocatable,
	})
	if err != nil {
		return nil, err
	}
	// CSI volumes: inline ones, and PVCs (generic ephemeral volumes too)
	// bound to CSI PersistentVolumes.
	csiVols, err := csi.NewVolumePlugin(csi.VolumePluginConfig{
		RootDir: opts.RootDir, NodeName: opts.NodeName, Drivers: n.csiDrivers, Client: n.client, Clock: n.clock,
		StatsPeriod: opts.Config.VolumeStatsAggPeriod.Duration, Recorder: n.recorder, Objects: n.csiObjects(),
	})
	if err != nil {
		return nil, err
	}
	csi.RegisterMetrics(metrics.Kubelet, csiVols)
	for _, kind := range []string{"csi", "persistentVolumeClaim", "ephemeral"} {
		vols.Register(kind, csiVols)
	}
	n.csiVolumes = csiVols
	n.volumes = vols
	return n, nil
}

// Run runs the agent until ctx is done. Pods keep running after it returns,
// as with the upstream kubelet.
func (n *Nodelet) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	cfg := &n.opts.Config
	n.hostIPs = nodeIPs(n.opts.NodeIP)
	mode := "standalone"
	if n.client != nil {
		mode = "cluster"
	}
	logger.Info("Starting nodelet", "mode", mode, "node", n.opts.NodeName, "nodeIPs", n.hostIPs, "staticPodPath", cfg.StaticPodPath,
		"runtimeEndpoint", cfg.ContainerRuntimeEndpoint, "rootDir", n.opts.RootDir, "podLogsDir", cfg.PodLogsDir)
	if err := os.MkdirAll(filepath.Join(n.opts.RootDir, "pods"), 0o750); err != nil {
		return err
	}
	facts, err := machine.Read(machine.Config{RootDir: n.opts.RootDir})
	if err != nil {
		return err
	}
	n.machine = facts
	if err := n.startCgroups(ctx); err != nil {
		return err
	}
	n.lastLoop.Store(n.clock.Now().UnixNano())

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	goRun := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	healthErr := make(chan error, 1)
	if *cfg.HealthzPort > 0 {
		addr := net.JoinHostPort(cfg.HealthzBindAddress, strconv.Itoa(int(*cfg.HealthzPort)))
		goRun(func() {
			if err := healthz.Serve(ctx, addr, n.healthHandler()); err != nil {
				healthErr <- err
			}
		})
	}

	rs, is, err := n.connect(ctx)
	if err != nil {
		return err
	}
	if err := n.setup(ctx, rs, is); err != nil {
		return err
	}
	// Publishes the components set up above to the healthz handler.
	n.connected.Store(true)
	if err := n.startSideLoops(ctx, rs, is, goRun); err != nil {
		return err
	}
	if err := n.startPlugins(ctx, goRun); err != nil {
		return err
	}
	if err := n.startDevices(ctx, goRun); err != nil {
		return err
	}
	if err := n.startPodResources(ctx, goRun); err != nil {
		return err
	}
	n.restore(ctx, goRun)

	var fileUpdates <-chan []*v1.Pod
	if cfg.StaticPodPath != "" {
		src, err := file.New(file.Config{Dir: cfg.StaticPodPath, NodeName: n.opts.NodeName, Period: cfg.FileCheckFrequency.Duration, Clock: n.clock})
		if err != nil {
			return err
		}
		goRun(func() { src.Run(ctx) })
		fileUpdates = src.Updates()
	} else {
		n.sourcesSeen[sourceFile] = true
	}
	var apiEvents <-chan apiserver.Event
	var mirrorEvents <-chan *v1.Pod
	if n.client != nil {
		goRun(func() { n.apiSource.Run(ctx) })
		goRun(func() { n.nodeStatus.Run(ctx) })
		goRun(func() { n.syncer.Run(ctx) })
		goRun(func() { n.serviceSource.Run(ctx) })
		apiEvents, mirrorEvents = n.apiSource.Events(), n.apiSource.Mirrors()
	} else {
		n.sourcesSeen[sourceAPI] = true
	}
	n.checkSourcesReady()
	goRun(func() { n.pleg.Run(ctx) })
	goRun(func() { n.eviction.Run(ctx) }) // pressure conditions
	if n.shutdown != nil {
		goRun(func() { n.shutdown.Run(ctx) })
	}
	goRun(func() { n.imageGC.Run(ctx) })
	goRun(func() { n.runContainerGC(ctx) })
	trim, err := memtrim.New(memtrim.Config{Clock: n.clock, Ready: func() bool {
		return n.sourcesReady.Load() && (n.nodeStatus == nil || n.nodeStatus.Node() != nil)
	}})
	if err != nil {
		return err
	}
	goRun(func() { trim.Run(ctx) })

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
		case pods := <-fileUpdates:
			n.apply(ctx, n.pods.Set(sourceFile, pods))
			n.sourcesSeen[sourceFile] = true
			n.checkSourcesReady()
		case e := <-apiEvents:
			n.applyAPI(ctx, e)
		case mp := <-mirrorEvents:
			// A mirror pod changed or was deleted: its static pod's worker
			// puts it right.
			if p, ok := n.pods.GetByName(mp.Namespace, mp.Name); ok {
				n.workers.Notify(p.UID)
				n.statuses.MarkDirty(p.UID) // a new mirror pod needs the status
			}
		case e := <-n.pleg.Watch():
			if !n.podsync.Redundant(e) {
				n.workers.Notify(e.ID)
			}
		case uid := <-n.prober.Updates():
			n.workers.Notify(uid)
		case <-housekeeping.C():
			n.housekeeping(ctx)
		}
	}
}

func (n *Nodelet) checkSourcesReady() {
	if n.sourcesSeen[sourceFile] && n.sourcesSeen[sourceAPI] {
		n.sourcesReady.Store(true)
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
				return metrics.InstrumentRuntime(rs), metrics.InstrumentImages(is), nil
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

// runtimeWatchers are the event streams the PLEG follows to relist as soon
// as a container changes: the CRI's own (containerd >= 1.7, CRI-O), else
// containerd's event service (containerd 1.6). Upstream's EventedPLEG
// feature gate set to false turns them off (relisting every second only).
func runtimeWatchers(cfg *kubeletv1beta1.KubeletConfiguration) []pleg.Watcher {
	if on, set := cfg.FeatureGates["EventedPLEG"]; set && !on {
		return nil
	}
	return []pleg.Watcher{
		&pleg.CRIEvents{Endpoint: cfg.ContainerRuntimeEndpoint},
		&pleg.ContainerdEvents{Endpoint: cfg.ContainerRuntimeEndpoint},
	}
}

// setup creates the components that need the runtime. In cluster mode it
// also creates those that talk to the API server.
func (n *Nodelet) setup(ctx context.Context, rs internalapi.RuntimeService, is internalapi.ImageManagerService) error {
	cfg := &n.opts.Config
	pullCfg := images.Config{
		Service: is, Recorder: n.recorder, Clock: n.clock,
		Serialize: *cfg.SerializeImagePulls, MaxParallel: cfg.MaxParallelImagePulls,
	}
	if n.objects != nil {
		pullCfg.Secrets = n.objects // imagePullSecrets, through the shared cache
	}
	var err error
	if n.puller, err = images.New(pullCfg); err != nil {
		return err
	}
	runner := &prober.Runner{Runtime: rs}
	if n.devices, err = n.newDevices(); err != nil {
		return err
	}
	rtCfg := kuberuntime.Config{
		Runtime:    rs,
		Images:     n.puller,
		Hooks:      runner,
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
		Resources:             n.cgroups.ResourceOptions(),
		PodCgroups:            n.cgroups,
		NodeAllocatable:       n.allocatable,
		RootDir:               n.opts.RootDir,
		DevicePlugins:         n.devices,
	}
	if err = n.addEnvSources(&rtCfg); err != nil {
		return err
	}
	if n.runtime, err = kuberuntime.New(rtCfg); err != nil {
		return err
	}
	if n.pleg, err = pleg.New(pleg.Config{Lister: n.runtime, Period: plegRelistPeriod, Clock: n.clock, Watchers: runtimeWatchers(cfg)}); err != nil {
		return err
	}
	if n.prober, err = prober.New(prober.Config{Runner: runner, Recorder: n.recorder, Clock: n.clock}); err != nil {
		return err
	}
	if n.stats, err = n.newStats(ctx, rs, is); err != nil {
		return err
	}
	if n.imageGC, err = n.newImageGC(rs, is); err != nil {
		return err
	}
	if n.eviction, err = n.newEviction(ctx); err != nil {
		return err
	}
	if n.shutdown, err = n.newShutdown(); err != nil {
		return err
	}
	if n.client != nil {
		if err := n.setupCluster(cfg, rs, is); err != nil {
			return err
		}
	}
	ps := podsync.Config{
		Runtime: n.runtime, Volumes: n.volumes, Prober: n.prober, Statuses: n.statuses, Cgroups: n.cgroups,
		Images: n.puller, Recorder: n.recorder, ProbeContext: ctx, HostIPs: n.hostIPs, RuntimeName: n.runtimeName,
		Clock: n.clock,
	}
	if n.client != nil { // typed nil pointers would be non-nil interfaces
		ps.Mirrors, ps.Finisher, ps.Objects = n.mirrors, n.syncer, n.objects
	}
	if n.podsync, err = podsync.New(ps); err != nil {
		return err
	}
	n.workers, err = podworkers.New(podworkers.Config{
		Context:      ctx,
		Syncer:       n.podsync,
		Clock:        n.clock,
		Resync:       cfg.SyncFrequency.Duration,
		OnTerminated: n.onTerminated,
	})
	return err
}

// setupCluster creates the components that talk to the API server.
func (n *Nodelet) setupCluster(cfg *kubeletv1beta1.KubeletConfiguration, rs internalapi.RuntimeService, is internalapi.ImageManagerService) error {
	var err error
	if n.apiSource, err = apiserver.New(apiserver.Config{Client: n.client, NodeName: n.opts.NodeName}); err != nil {
		return err
	}
	if n.nodeStatus, err = nodestatus.New(nodestatus.Config{
		Client: n.client, NodeName: n.opts.NodeName, NodeIPs: n.hostIPs, Labels: n.opts.NodeLabels,
		Kubelet: cfg, Runtime: rs, Images: is, Machine: n.machine, Clock: n.clock, Recorder: n.recorder,
		Pressure: n.eviction, ShuttingDown: n.shuttingDown, VolumesInUse: n.csiVolumes.InUse,
		DeviceResources: n.devices.Resources,
	}); err != nil {
		return err
	}
	if n.mirrors, err = mirror.New(mirror.Config{Client: n.client, Lister: n.apiSource.Lister(), Node: n.nodeStatus.Node}); err != nil {
		return err
	}
	n.syncer, err = status.NewSyncer(status.SyncerConfig{Client: n.client, Lister: n.apiSource.Lister(), Store: n.statuses, Clock: n.clock})
	return err
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
		healthz.Check{Name: "offline", Fn: func() error { return nil }, Info: n.offlineInfo},
		healthz.Check{Name: "syncloop", Fn: func() error {
			last := time.Unix(0, n.lastLoop.Load())
			if since := n.clock.Since(last); since > syncLoopUnhealthy {
				return fmt.Errorf("sync loop last turned %v ago", since.Round(time.Second))
			}
			return nil
		}},
	)
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

// admissionNode is the Node pods are admitted against: the registered one,
// or in standalone mode a node whose allocatable has only maxPods.
func (n *Nodelet) admissionNode() *v1.Node {
	if n.nodeStatus != nil {
		if node := n.nodeStatus.Node(); node != nil || n.offline == nil {
			return node
		}
		// Not registered yet (the API server may be gone): the Node the
		// checkpoint keeps, if any.
		return n.offline.Node()
	}
	node := &v1.Node{}
	node.Name = n.opts.NodeName
	node.Status.Allocatable = v1.ResourceList{v1.ResourcePods: *resourceQuantity(int64(n.opts.Config.MaxPods))}
	return node
}
