package nodelet

import (
	"context"
	"errors"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	internalapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/allocation"
	"github.com/nodelet/nodelet/internal/apiclient"
	"github.com/nodelet/nodelet/internal/apiutil"
	"github.com/nodelet/nodelet/internal/cgroups"
	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/config"
	"github.com/nodelet/nodelet/internal/cpumanager"
	"github.com/nodelet/nodelet/internal/csi"
	"github.com/nodelet/nodelet/internal/devicemanager"
	"github.com/nodelet/nodelet/internal/dra"
	"github.com/nodelet/nodelet/internal/events"
	"github.com/nodelet/nodelet/internal/eviction"
	"github.com/nodelet/nodelet/internal/imagegc"
	"github.com/nodelet/nodelet/internal/images"
	"github.com/nodelet/nodelet/internal/kuberuntime"
	"github.com/nodelet/nodelet/internal/lifecycle"
	"github.com/nodelet/nodelet/internal/machine"
	"github.com/nodelet/nodelet/internal/memorymanager"
	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/mirror"
	"github.com/nodelet/nodelet/internal/nodestatus"
	"github.com/nodelet/nodelet/internal/pleg"
	"github.com/nodelet/nodelet/internal/podcertificate"
	"github.com/nodelet/nodelet/internal/podmanager"
	"github.com/nodelet/nodelet/internal/podsync"
	"github.com/nodelet/nodelet/internal/podworkers"
	"github.com/nodelet/nodelet/internal/prober"
	"github.com/nodelet/nodelet/internal/process"
	"github.com/nodelet/nodelet/internal/rootdir"
	"github.com/nodelet/nodelet/internal/serviceenv"
	"github.com/nodelet/nodelet/internal/shutdown"
	"github.com/nodelet/nodelet/internal/source/apiserver"
	"github.com/nodelet/nodelet/internal/stats"
	"github.com/nodelet/nodelet/internal/status"
	"github.com/nodelet/nodelet/internal/syncloop"
	"github.com/nodelet/nodelet/internal/topologymanager"
	"github.com/nodelet/nodelet/internal/tracing"
	"github.com/nodelet/nodelet/internal/userns"
	"github.com/nodelet/nodelet/internal/volumes"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is what a Nodelet is built from.
type Config struct {
	// Options are the resolved flags and configuration file. Required.
	Options *config.Options
	// Clock is every component's (the real clock when nil).
	Clock clock.WithTicker
	// Runtime and Images, when both set, are the CRI services (tests give
	// fakes); else Run dials the configured endpoints.
	Runtime internalapi.RuntimeService
	Images  internalapi.ImageManagerService
	// Registerer registers the components' metrics (the kubelet's
	// registry, served at /metrics, when nil).
	Registerer prometheus.Registerer
	// Machine is where the machine's facts are read (the real /proc,
	// /sys and /sys/fs/cgroup when zero; RootDir is the Options').
	Machine machine.Config
	// Client and Events, when set, are the API clients (tests give a
	// fake): cluster mode without a kubeconfig. Else New builds them from
	// the kubeconfig, if one is configured.
	Client apiclient.Interface
	Events typedcorev1.EventsGetter
}

// Nodelet is the node agent.
type Nodelet struct {
	opts  *config.Options
	root  rootdir.Dir
	clock clock.WithTicker
	// client and eventsClient are nil standalone; certs is nil when the
	// clients were given (Config.Client) or standalone.
	client       apiclient.Interface
	eventsClient typedcorev1.EventsGetter
	certs        *apiclient.Clients
	// rs and is are Config.Runtime and Config.Images.
	rs internalapi.RuntimeService
	is internalapi.ImageManagerService
	// machineConfig is Config.Machine.
	machineConfig machine.Config
	registerer    prometheus.Registerer
	// contact follows whether the API server answers.
	contact  *apiutil.Contact
	recorder record.EventRecorder
	// events are the pods' recent events (the recorder's), for the local
	// API's describe.
	events *events.Store
	loops  *lifecycle.Group
	// connected is closed once the runtime answered and the components
	// that need it exist (healthz reports them from then on).
	connected lifecycle.Ready

	// The components: built in New (those that need no runtime) and in
	// setup (those that do).
	hostIPs  []string
	machine  machine.Facts
	pods     *podmanager.Manager
	view     *podmanager.View
	statuses *status.Store
	main     *syncloop.Loop
	// sourcesReady is closed by the main loop once every pod source was
	// seen once.
	sourcesReady lifecycle.Ready
	volumes      *volumes.Manager
	// objects reads ConfigMaps, Secrets and tokens: the API getter, or the
	// offline checkpoint's read-through getter over it.
	objects    checkpoint.API
	apiGetter  *volumes.APIGetter
	offline    *checkpoint.Manager // nil when off or standalone
	csiDrivers *csi.Drivers
	csiVolumes *csi.VolumePlugin
	cgroups    *cgroups.Manager

	runtime     *kuberuntime.Manager
	userns      *userns.Manager
	runtimeName string
	puller      *images.Puller
	pleg        *pleg.Generic
	prober      *prober.Manager
	workers     *podworkers.Workers
	podsync     *podsync.Syncer
	allocation  *allocation.Manager
	stats       *stats.Provider
	eviction    *eviction.Manager
	shutdown    *shutdown.Manager // nil when off
	imageGC     *imagegc.Manager
	containerGC *kuberuntime.GC
	devices     *devicemanager.Manager
	draPlugins  *dra.Plugins // cluster mode only
	dra         *dra.Manager // cluster mode only
	cpus        *cpumanager.Manager
	mems        *memorymanager.Manager
	topology    *topologymanager.Manager
	sysctls     *admission.Sysctls
	declared    *admission.DeclaredFeatures
	podCerts    *podcertificate.Manager
	tp          tracing.Provider
	preemption  *admission.Preemption
	// allocatableOf is the node's allocatable (nodestatus.AllocatableOf).
	allocatableOf func() v1.ResourceList

	// Cluster mode only (nil standalone).
	apiSource  *apiserver.Source
	nodeStatus *nodestatus.Manager
	mirrors    *mirror.Manager
	syncer     *status.Syncer
	services   *serviceenv.Services
}

// New returns a Nodelet for cfg. It does not connect to anything yet,
// except for TLS bootstrap (--bootstrap-kubeconfig without
// rotateCertificates), which waits for the client certificate.
func New(ctx context.Context, cfg Config) (*Nodelet, error) {
	if cfg.Options == nil {
		return nil, errors.New("nodelet: Config.Options is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Registerer == nil {
		cfg.Registerer = metrics.Kubelet
	}
	opts := cfg.Options
	n := &Nodelet{opts: opts, root: rootdir.Dir(opts.RootDir), clock: cfg.Clock, events: events.New(), statuses: status.NewStore(),
		pods: podmanager.New(), csiDrivers: &csi.Drivers{}, hostIPs: machine.NodeIPs(opts.NodeIP)}
	n.contact = apiutil.NewContact(n.clock)
	var err error
	if n.loops, err = lifecycle.New(lifecycle.Config{Clock: n.clock}); err != nil {
		return nil, err
	}
	n.client, n.eventsClient, n.rs, n.is, n.machineConfig = cfg.Client, cfg.Events, cfg.Runtime, cfg.Images, cfg.Machine
	n.machineConfig.RootDir, n.registerer = opts.RootDir, cfg.Registerer
	if n.client == nil && opts.KubeconfigPath != "" {
		if n.certs, err = newClients(ctx, opts, n.contact); err != nil {
			return nil, err
		}
		n.client, n.eventsClient = n.certs.API, n.certs.Events
	}
	n.recorder, _ = events.NewRecorder(n.eventsClient, opts.NodeName, n.events)
	if n.tp, err = tracing.NewProvider(ctx, opts.Config.Tracing, opts.NodeName); err != nil {
		return nil, err
	}
	if err := n.build(); err != nil {
		return nil, err
	}
	return n, nil
}

// Run runs the agent until ctx is done, or until a fatal loop fails (its
// error). Pods keep running after it returns, as with the upstream
// kubelet.
func (n *Nodelet) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	cfg := &n.opts.Config
	mode := "standalone"
	if n.client != nil {
		mode = "cluster"
	}
	logger.Info("Starting nodelet", "mode", mode, "node", n.opts.NodeName, "nodeIPs", n.hostIPs, "staticPodPath", cfg.StaticPodPath,
		"runtimeEndpoint", cfg.ContainerRuntimeEndpoint, "rootDir", n.opts.RootDir, "podLogsDir", cfg.PodLogsDir)
	if err := os.MkdirAll(n.root.Pods(), 0o750); err != nil {
		return err
	}
	// The pod workers and probes stop with ctx, or when a fatal loop
	// failed; the loops stop with the group, in order.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var err error
	if n.machine, err = machine.Read(n.machineConfig); err != nil {
		return err
	}
	if err := checkCgroupV1(cfg, n.machine); err != nil {
		return err
	}
	if err := checkSwap(cfg, n.machine); err != nil {
		return err
	}
	n.warnSwapTmpfs(n.machine)
	process.Apply(ctx, process.Settings{OOMScoreAdj: cfg.OOMScoreAdj, MaxOpenFiles: &cfg.MaxOpenFiles})
	defer tracing.Flush(ctx, n.tp)
	defer n.loops.Stop()
	if err := n.loops.Start(ctx, n.earlyLoops()...); err != nil {
		return err
	}
	rs, is, err := n.dial(ctx)
	if err != nil {
		if lerr := n.loops.Err(); lerr != nil {
			return lerr
		}
		return err
	}
	if err := n.startCgroups(ctx, rs); err != nil {
		return err
	}
	if err := n.setup(ctx, rs, is); err != nil {
		return err
	}
	if cfg.PodCIDR != "" {
		// As upstream, at start; in cluster mode the Node's spec.podCIDRs,
		// once allocated, replace it (the node status loop).
		if err := nodestatus.UpdatePodCIDR(ctx, rs, cfg.PodCIDR); err != nil {
			logger.Error(err, "Cannot give the runtime podCIDR")
		}
	}
	n.connected.Close()
	if err := n.devices.Restore(ctx); err != nil {
		return err
	}
	if n.offline != nil {
		if pods := n.offline.Restore(ctx); len(pods) > 0 {
			n.main.Restore(ctx, pods)
		}
	}
	loops, err := n.sideLoops(ctx, rs)
	if err != nil {
		return err
	}
	if err := n.loops.Start(ctx, loops...); err != nil {
		return err
	}
	in := syncloop.Inputs{PLEG: n.pleg.Watch(), Probes: n.prober.Updates(), Abort: n.loops.Done(), AbortErr: n.loops.Err}
	if err := n.startSources(ctx, &in); err != nil {
		return err
	}
	housekeeping := n.clock.NewTicker(syncloop.HousekeepingPeriod)
	defer housekeeping.Stop()
	in.Tick = housekeeping.C()
	err = n.main.Run(ctx, in)
	cancel()
	n.workers.Wait()
	return err
}

// dial connects to the CRI runtime (unless New was given it), waiting for
// it while it is not there; a fatal loop failing meanwhile stops the wait.
func (n *Nodelet) dial(ctx context.Context) (internalapi.RuntimeService, internalapi.ImageManagerService, error) {
	if n.rs != nil && n.is != nil {
		return n.rs, n.is, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-n.loops.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	cfg := &n.opts.Config
	rs, is, v, err := kuberuntime.Dial(ctx, kuberuntime.DialConfig{RuntimeEndpoint: cfg.ContainerRuntimeEndpoint, ImageEndpoint: cfg.ImageServiceEndpoint,
		Timeout: cfg.RuntimeRequestTimeout.Duration, Clock: n.clock, TracerProvider: n.tp})
	if err != nil {
		return nil, nil, err
	}
	n.runtimeName = v.RuntimeName
	return rs, is, nil
}

// checkCgroupV1 refuses cgroup v1 unless failCgroupV1 is false, as
// upstream's configuration validation (its message).
func checkCgroupV1(cfg *kubeletv1beta1.KubeletConfiguration, m machine.Facts) error {
	if m.Cgroups.V2 || (cfg.FailCgroupV1 != nil && !*cfg.FailCgroupV1) {
		return nil
	}
	return errors.New("failed to validate kubelet configuration: kubelet is configured to not run on a host using cgroup v1. " +
		"cgroup v1 support is unsupported and will be removed in a future release (failCgroupV1 is true, its default: set failCgroupV1: false, or --fail-cgroupv1=false, to run on cgroup v1)")
}

// checkSwap refuses to start with swap on unless failSwapOn is false, as
// upstream's container manager (its message).
func checkSwap(cfg *kubeletv1beta1.KubeletConfiguration, m machine.Facts) error {
	if !m.Swap.On || (cfg.FailSwapOn != nil && !*cfg.FailSwapOn) {
		return nil
	}
	return errors.New("running with swap on is not supported, please disable swap or set --fail-swap-on flag to false")
}

// swapTmpfsWarning is upstream's node event when swap is on and tmpfs
// cannot be mounted noswap.
const swapTmpfsWarning = "The tmpfs noswap option is not supported. Memory-backed volumes (e.g. secrets, emptyDirs, etc.) " +
	"might be swapped to disk and should no longer be considered secure."

// warnSwapTmpfs records upstream's Warning node event
// PossibleMemoryBackedVolumesOnDisk when swap is on (failSwapOn is false:
// checkSwap let nodelet start) and tmpfs cannot be mounted noswap (kernel
// before 6.4, or a user namespace), as upstream's container manager.
func (n *Nodelet) warnSwapTmpfs(m machine.Facts) {
	if m.Swap.On && !m.Swap.TmpfsNoswap {
		n.nodeEvent(v1.EventTypeWarning, "PossibleMemoryBackedVolumesOnDisk", swapTmpfsWarning)
	}
}

// startCgroups creates the pods' cgroups with the cgroup driver the runtime
// reports (RuntimeConfig), else the configured one, as upstream.
func (n *Nodelet) startCgroups(ctx context.Context, rs internalapi.RuntimeService) error {
	cfg := &n.opts.Config
	driver, unsupported, err := kuberuntime.CgroupDriver(ctx, rs, n.clock, cfg.CgroupDriver)
	if err != nil {
		return err
	}
	if unsupported {
		metrics.CRILosingSupport.WithLabelValues(kuberuntime.CRILosingSupportVersion).Set(1)
	}
	cfg.CgroupDriver = driver
	if n.cgroups, err = cgroups.New(cgroups.FromKubelet(cfg, n.machine, n.nodeEvent)); err != nil {
		return fmt.Errorf("pod cgroups: %w", err)
	}
	return n.cgroups.Start(ctx)
}

// nodeRef is the Node's reference node events point at, as upstream.
func (n *Nodelet) nodeRef() *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: n.opts.NodeName, UID: types.UID(n.opts.NodeName)}
}

// nodeEvent records an event of the node.
func (n *Nodelet) nodeEvent(eventType, reason, message string) {
	n.recorder.Event(n.nodeRef(), eventType, reason, message)
}

// admissionNode is the Node pods are admitted against: the registered one
// (or, while it is not, the one the offline checkpoint keeps); standalone,
// a node whose allocatable has only maxPods.
func (n *Nodelet) admissionNode() *v1.Node {
	if n.nodeStatus != nil {
		if node := n.nodeStatus.Node(); node != nil || n.offline == nil {
			return node
		}
		return n.offline.Node()
	}
	node := &v1.Node{}
	node.Name = n.opts.NodeName
	node.Status.Allocatable = v1.ResourceList{v1.ResourcePods: *resource.NewQuantity(int64(n.opts.Config.MaxPods), resource.DecimalSI)}
	return node
}

// freshNode is the Node as the API server has it now (nil standalone).
func (n *Nodelet) freshNode(ctx context.Context) *v1.Node {
	if n.nodeStatus == nil {
		return nil
	}
	return n.nodeStatus.Fresh(ctx)
}

// registeredNode is the registered Node, nil standalone or before
// registration.
func (n *Nodelet) registeredNode() *v1.Node {
	if n.nodeStatus == nil {
		return nil
	}
	return n.nodeStatus.Node()
}

// shuttingDown is the node's not-ready reason while the machine shuts down.
func (n *Nodelet) shuttingDown() error {
	if n.shutdown == nil {
		return nil
	}
	return n.shutdown.ShuttingDown()
}

// refreshNode has the node status written now (devices or shutdown
// changed it).
func (n *Nodelet) refreshNode() {
	if n.nodeStatus != nil {
		n.nodeStatus.Refresh()
	}
}
