package nodelet

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/klog/v2"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/allocation"
	"github.com/nodelet/nodelet/internal/apiclient"
	"github.com/nodelet/nodelet/internal/apiutil"
	"github.com/nodelet/nodelet/internal/cgroups"
	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/config"
	"github.com/nodelet/nodelet/internal/cpumanager"
	"github.com/nodelet/nodelet/internal/credentialprovider"
	"github.com/nodelet/nodelet/internal/csi"
	"github.com/nodelet/nodelet/internal/devicemanager"
	"github.com/nodelet/nodelet/internal/dra"
	"github.com/nodelet/nodelet/internal/eviction"
	"github.com/nodelet/nodelet/internal/imagegc"
	"github.com/nodelet/nodelet/internal/images"
	"github.com/nodelet/nodelet/internal/images/pullmanager"
	"github.com/nodelet/nodelet/internal/kuberuntime"
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
	"github.com/nodelet/nodelet/internal/serviceenv"
	"github.com/nodelet/nodelet/internal/shutdown"
	"github.com/nodelet/nodelet/internal/source/apiserver"
	"github.com/nodelet/nodelet/internal/stats"
	"github.com/nodelet/nodelet/internal/status"
	"github.com/nodelet/nodelet/internal/syncloop"
	"github.com/nodelet/nodelet/internal/topologymanager"
	"github.com/nodelet/nodelet/internal/tracing"
	"github.com/nodelet/nodelet/internal/userns"
	"github.com/nodelet/nodelet/internal/version"
	"github.com/nodelet/nodelet/internal/volumes"
)

// plegRelistPeriod is how often the PLEG relists without runtime events.
const plegRelistPeriod = time.Second

// newClients builds the API clients from the kubeconfig.
func newClients(ctx context.Context, o *config.Options, contact *apiutil.Contact) (*apiclient.Clients, error) {
	c := &o.Config
	return apiclient.New(ctx, apiclient.Config{
		KubeconfigPath: o.KubeconfigPath, BootstrapKubeconfig: o.BootstrapKubeconfig, NodeName: o.NodeName, CertDir: o.CertDir,
		RotateCertificates: c.RotateCertificates, QPS: float32(*c.KubeAPIQPS), Burst: int(c.KubeAPIBurst),
		EventQPS: float32(*c.EventRecordQPS), EventBurst: int(c.EventBurst), ContentType: c.ContentType, Wrap: contact.Wrap,
	})
}

// build creates the components that need neither the runtime nor the
// machine's facts.
func (n *Nodelet) build() error {
	cfg := &n.opts.Config
	var err error
	var getter volumes.Getter
	if n.client != nil {
		// ConfigMaps and Secrets are re-read at most every syncFrequency
		// (and every minute at most): an update reaches running pods'
		// files within syncFrequency plus this TTL.
		if n.apiGetter, err = volumes.NewAPIGetter(volumes.APIGetterConfig{
			Client: n.client, Clock: n.clock, TTL: min(time.Minute, cfg.SyncFrequency.Duration),
		}); err != nil {
			return err
		}
		n.objects = n.apiGetter
		if n.opts.Offline.Autonomy {
			if err := n.newOffline(); err != nil {
				return err
			}
		}
		getter = n.objects
	}
	// Pods' volumes; the node's allocatable is for downwardAPI
	// resourceFieldRef limits a container does not set.
	volCfg := volumes.ManagerConfig{PodsDir: n.root.Pods(), Getter: getter, Allocatable: n.allocatable}
	if n.client != nil && config.GateEnabled(cfg, "PodCertificateRequest") {
		// podCertificate projected volumes: a key and a
		// PodCertificateRequest per source, issued by its signer.
		if n.podCerts, err = podcertificate.New(podcertificate.Config{Client: n.client, NodeName: n.opts.NodeName, Node: n.registeredNodeObject,
			Pods: n.pods, Recorder: n.recorder, Clock: n.clock}); err != nil {
			return err
		}
		volCfg.PodCertificates = n.podCerts
		podcertificate.RegisterMetrics(n.registerer, n.podCerts)
	}
	if n.volumes, err = volumes.New(volCfg); err != nil {
		return err
	}
	// CSI volumes: inline ones, and PVCs (generic ephemeral volumes too)
	// bound to CSI PersistentVolumes.
	var csiObjects csi.Objects
	if g, ok := n.objects.(*checkpoint.Getter); ok {
		csiObjects = g
	}
	if n.csiVolumes, err = csi.NewVolumePlugin(csi.VolumePluginConfig{
		RootDir: n.opts.RootDir, NodeName: n.opts.NodeName, Drivers: n.csiDrivers, Client: n.client, Clock: n.clock,
		StatsPeriod: cfg.VolumeStatsAggPeriod.Duration, Recorder: n.recorder, Objects: csiObjects,
	}); err != nil {
		return err
	}
	csi.RegisterMetrics(n.registerer, n.csiVolumes)
	for _, kind := range []string{"csi", "persistentVolumeClaim", "ephemeral"} {
		n.volumes.Register(kind, n.csiVolumes)
	}
	gate := func(name string) bool { return config.GateEnabled(cfg, name) }
	if n.declared, err = admission.NewDeclaredFeatures(gate, version.Kubelet); err != nil {
		return err
	}
	if n.sysctls, err = admission.NewSysctls(cfg.AllowedUnsafeSysctls); err != nil {
		return fmt.Errorf("allowedUnsafeSysctls: %w", err)
	}
	if n.preemption, err = admission.NewPreemption(admission.PreemptionConfig{Killer: evictor{n}, Recorder: n.recorder, Clock: n.clock}); err != nil {
		return err
	}
	return nil
}

// newOffline creates the offline checkpoint (offline autonomy): its
// read-through getter replaces the API getter for volumes, environments,
// image pull secrets and CSI objects.
func (n *Nodelet) newOffline() error {
	m, err := checkpoint.NewManager(checkpoint.ManagerConfig{
		Dir:     n.root.Offline(),
		Secrets: n.opts.Offline.Secrets,
		Pods:    func() []*v1.Pod { return n.pods.Source(syncloop.SourceAPI) },
		Status:  n.statuses.GetVersioned,
		Node:    n.registeredNode,
		Down:    n.contact.Down,
		Clock:   n.clock,
	})
	if err != nil {
		return err
	}
	n.offline = m
	n.objects = m.Getter(n.apiGetter, n.client, func(ns string, links bool) (map[string]string, error) {
		if n.services == nil {
			return nil, fmt.Errorf("no Service source")
		}
		return n.services.Env(ns, links)
	})
	checkpoint.RegisterMetrics(n.registerer, m)
	return nil
}

// allocatable is the node's allocatable: the Node's in cluster mode, else
// the machine's (set up once the machine's facts are read).
func (n *Nodelet) allocatable() v1.ResourceList { return n.allocatableOf() }

// setup creates the components that need the runtime and the machine's
// facts. In cluster mode it also creates those that talk to the API
// server.
func (n *Nodelet) setup(ctx context.Context, rs internalapi.RuntimeService, is internalapi.ImageManagerService) error {
	cfg := &n.opts.Config
	rs, is = metrics.InstrumentRuntime(rs), metrics.InstrumentImages(is)
	n.allocatableOf = nodestatus.AllocatableOf(cfg, n.machine, n.registeredNode)
	var err error
	pullCfg := images.Config{Service: is, Recorder: n.recorder, Clock: n.clock, Serialize: *cfg.SerializeImagePulls, MaxParallel: cfg.MaxParallelImagePulls}
	if n.objects != nil {
		pullCfg.Secrets = n.objects // imagePullSecrets, through the shared cache
	}
	if n.opts.ImageCredentialProviderConfig != "" || n.opts.ImageCredentialProviderBinDir != "" {
		cp := credentialprovider.Config{ConfigPath: n.opts.ImageCredentialProviderConfig, BinDir: n.opts.ImageCredentialProviderBinDir,
			Registry: n.registerer, Clock: n.clock}
		if n.client != nil {
			cp.Tokens = credentialprovider.APITokens{Client: n.client}
		}
		providers, err := credentialprovider.New(cp)
		if err != nil {
			return fmt.Errorf("image credential provider plugins (--image-credential-provider-config, --image-credential-provider-bin-dir): %w", err)
		}
		pullCfg.Providers = providers
	}
	var pulls *pullmanager.Manager
	if config.EnsureSecretPulledImages(cfg) {
		// KubeletEnsureSecretPulledImages: the pull records under
		// <root-dir>/image_manager, the image GC prunes them.
		if pulls, err = pullmanager.New(ctx, pullmanager.Config{RootDir: n.opts.RootDir, Images: is,
			Policy: cfg.ImagePullCredentialsVerificationPolicy, Allowlist: cfg.PreloadedImagesVerificationAllowlist,
			MaxPods: cfg.MaxPods, MaxParallelImagePulls: ptr.Deref(cfg.MaxParallelImagePulls, 0), Registerer: n.registerer, Clock: n.clock}); err != nil {
			return fmt.Errorf("image pull records: %w", err)
		}
		pullCfg.Pulls = pulls
	}
	if n.puller, err = images.New(pullCfg); err != nil {
		return err
	}
	runner := &prober.Runner{Runtime: rs}
	rtCfg := kuberuntime.Config{
		Runtime: rs, Images: n.puller, Hooks: runner, Recorder: n.recorder, Clock: n.clock, PodLogsDir: cfg.PodLogsDir,
		PodsDir: n.root.Pods(), RootDir: n.opts.RootDir, RuntimeRequestTimeout: cfg.RuntimeRequestTimeout.Duration, SeccompDefault: ptr.Deref(cfg.SeccompDefault, false),
		ContainerStopSignals: cfg.FeatureGates["ContainerStopSignals"],
		CrashLoopBackOffMax:  config.CrashLoopBackOffMax(cfg),
		DNS:                  kuberuntime.DNSConfig{ResolvConf: *cfg.ResolverConfig, ClusterDNS: cfg.ClusterDNS, ClusterDomain: cfg.ClusterDomain},
		Resources:            n.cgroups.ResourceOptions(), PodCgroups: n.cgroups, NodeAllocatable: n.allocatable,
		PodResizer: n.cgroups,
	}
	numa, err := topologymanager.ReadNUMAInfo("/")
	if err != nil {
		return err
	}
	if n.devices, err = devicemanager.New(devicemanager.Config{
		Dir: n.root.DevicePlugins(), SourcesReady: n.sourcesReady.IsReady, OnChange: n.refreshNode, NUMANodes: numa.Nodes,
		ActivePods: func() []*v1.Pod { return n.view.ResourceHolders() }, Registerer: n.registerer, Clock: n.clock,
	}); err != nil {
		return err
	}
	rtCfg.DevicePlugins = n.devices
	if n.client != nil {
		if err := n.newDRA(); err != nil {
			return err
		}
		rtCfg.DRA = n.dra
	}
	// The aligned compute resources counters: the topology manager's and
	// the CPU manager's.
	alignment := topologymanager.NewAlignmentMetrics(n.registerer)
	if n.cpus, err = n.newCPUManager(rs, alignment); err != nil {
		return err
	}
	rtCfg.CPUs = n.cpus
	if n.mems, err = n.newMemoryManager(); err != nil {
		return err
	}
	rtCfg.Mems = n.mems
	// The resource managers as the topology manager's hint providers, in
	// upstream's order.
	if n.topology, err = topologymanager.New(topologymanager.Config{Policy: cfg.TopologyManagerPolicy, Scope: cfg.TopologyManagerScope,
		Options: cfg.TopologyManagerPolicyOptions, NUMA: numa, Providers: []topologymanager.Provider{n.devices, n.cpus, n.mems},
		Registerer: n.registerer, Alignment: alignment, Clock: n.clock}); err != nil {
		return fmt.Errorf("topology manager (topologyManagerPolicy %q): %w", cfg.TopologyManagerPolicy, err)
	}
	if n.client != nil {
		// What containers' environments refer to in cluster mode:
		// ConfigMaps and Secrets, Services and RuntimeClasses.
		if n.services, err = serviceenv.New(serviceenv.Config{Client: n.client}); err != nil {
			return err
		}
		rtCfg.Objects, rtCfg.ServiceEnv, rtCfg.RuntimeHandlers = n.objects, n.services.Env, kuberuntime.RuntimeClassHandlers(n.client)
		if g, ok := n.objects.(*checkpoint.Getter); ok {
			rtCfg.ServiceEnv = g.ServiceEnv // offline: the environment last computed
		}
	}
	var idsPerPod *int64
	if cfg.UserNamespaces != nil {
		idsPerPod = cfg.UserNamespaces.IDsPerPod
	}
	if n.userns, err = userns.New(ctx, userns.Config{PodsDir: n.root.Pods(), IDsPerPod: idsPerPod, MaxPods: int(cfg.MaxPods),
		HandlerSupportsUserNamespaces: func(handler string) (bool, error) {
			return userns.RuntimeHandlerSupportsUserNamespaces(n.runtime.Features().Handlers(ctx), handler)
		}}); err != nil {
		return fmt.Errorf("user namespaces: %w", err)
	}
	rtCfg.UserNamespaces = n.userns
	if n.runtime, err = kuberuntime.New(rtCfg); err != nil {
		return err
	}
	if n.pleg, err = pleg.New(pleg.Config{Lister: n.runtime, Period: plegRelistPeriod, Clock: n.clock, Watchers: pleg.RuntimeWatchers(cfg.ContainerRuntimeEndpoint, cfg.FeatureGates)}); err != nil {
		return err
	}
	if n.prober, err = prober.New(prober.Config{Runner: runner, Recorder: n.recorder, Clock: n.clock}); err != nil {
		return err
	}
	if n.stats, err = n.newStats(ctx, rs, is); err != nil {
		return err
	}
	if n.imageGC, err = imagegc.New(imagegc.Config{
		Images: is, Runtime: rs, FsStats: n.stats.ImageFsCapacity, HighThresholdPercent: int(*cfg.ImageGCHighThresholdPercent),
		LowThresholdPercent: int(*cfg.ImageGCLowThresholdPercent), MinAge: cfg.ImageMinimumGCAge.Duration, MaxAge: cfg.ImageMaximumGCAge.Duration,
		Period: n.opts.ImageGCPeriod, StateFile: n.root.ImageGCState(), Recorder: n.recorder, Node: n.nodeRef(), Clock: n.clock,
		AfterCollect: pruneRecords(pulls), Tracer: n.tp.Tracer(tracing.InstrumentationScope),
	}); err != nil {
		return err
	}
	// Eviction and shutdown pick and stop pods through the pod workers
	// and the view built below (evictor, shutdownStopper, closures).
	if n.eviction, err = n.newEviction(ctx); err != nil {
		return err
	}
	if periods := shutdown.Periods(cfg.ShutdownGracePeriodByPodPriority, cfg.ShutdownGracePeriod.Duration,
		cfg.ShutdownGracePeriodCriticalPods.Duration); len(periods) > 0 {
		// As upstream's active pods: those being deleted included (their
		// stop is waited for, and shortened to their group's).
		if n.shutdown, err = shutdown.New(shutdown.Config{Periods: periods, ActivePods: func() []*v1.Pod { return n.view.Live() },
			Stopper: shutdownStopper{n}, NodeChanged: n.refreshNode, Recorder: n.recorder, Node: n.nodeRef(),
			StateFile: n.root.ShutdownState(), Clock: n.clock}); err != nil {
			return err
		}
	}
	ps := podsync.Config{
		Runtime: n.runtime, Volumes: n.volumes, Prober: n.prober, Statuses: n.statuses, Cgroups: n.cgroups, Images: n.puller,
		Recorder: n.recorder, ProbeContext: ctx, HostIPs: n.hostIPs, RuntimeName: n.runtimeName, Clock: n.clock,
		SupportsRRO: n.runtime.SupportsRRO,
	}
	if config.GateOn(cfg, "ResourceHealthStatus") {
		ps.AllocatedResources = n.devices
		n.devices.OnPodsChanged(n.devicesHealthChanged)
	}
	if n.client != nil {
		if err := n.setupCluster(rs, is); err != nil {
			return err
		}
		// Statuses go to the API, static pods get mirror pods.
		ps.Mirrors, ps.Finisher, ps.Objects, ps.DRA = n.mirrors, n.syncer, n.objects, n.dra
	}
	ps.Tracer = n.tp.Tracer(tracing.InstrumentationScope)
	chain := n.admissionChain()
	resources := n.cgroups.ResourceOptions()
	if n.allocation, err = allocation.New(allocation.Config{Dir: n.opts.RootDir, Admit: chain.Admit, Pod: n.pods.Get,
		CPUManagerStatic:    n.cpus.Policy() == cpumanager.PolicyStatic,
		MemoryManagerStatic: n.mems.Policy() == memorymanager.PolicyStatic,
		Active:              func() []*v1.Pod { return n.view.Active("") },
		SwapBehavior:        func(pod *v1.Pod, c *v1.Container) string { return cgroups.SwapBehavior(pod, c, resources) },
		Recorder:            n.recorder, Clock: n.clock}); err != nil {
		return err
	}
	ps.Resizes = n.allocation
	if n.podsync, err = podsync.New(ps); err != nil {
		return err
	}
	if n.workers, err = podworkers.New(podworkers.Config{Context: ctx, Syncer: n.podsync, Clock: n.clock,
		Resync: cfg.SyncFrequency.Duration, OnTerminated: func(uid types.UID) { n.main.OnTerminated(ctx, uid) }}); err != nil {
		return err
	}
	if n.view, err = podmanager.NewView(podmanager.ViewConfig{Pods: n.pods, Statuses: n.statuses, Workers: n.workers, Evictions: n.podsync,
		Pending: func() []*v1.Pod { return n.main.Pending() }}); err != nil {
		return err
	}
	gcPolicy := kuberuntime.GCPolicy{MinAge: n.opts.ContainerGC.MinAge, MaxPerPodContainer: n.opts.ContainerGC.MaxPerPodContainer,
		MaxContainers: n.opts.ContainerGC.MaxContainers}
	if n.containerGC, err = kuberuntime.NewGC(kuberuntime.GCConfig{Manager: n.runtime, Pods: n.view, Recorder: n.recorder, Node: n.nodeRef(),
		Policy: gcPolicy, Period: n.opts.ContainerGCPeriod, SourcesReady: n.sourcesReady.IsReady, Clock: n.clock,
		Tracer: n.tp.Tracer(tracing.InstrumentationScope)}); err != nil {
		return err
	}
	loop := syncloop.Config{Pods: n.pods, View: n.view, Workers: n.workers, Admission: chain, AdmissionNode: n.admissionNode,
		Statuses: n.statuses, Recorder: n.recorder, Release: n.devices.Release, Redundant: n.podsync.Redundant, Relisted: n.pleg.RunningPods,
		Leftovers: syncloop.Leftovers{PodDirs: n.volumes, PodLogsDir: cfg.PodLogsDir, Cgroups: n.cgroups, GCBackoff: n.runtime.GCBackoff,
			UserNamespaces: n.userns, Actuated: n.runtime.ForgetActuated},
		SourcesReady: &n.sourcesReady, Clock: n.clock, Allocation: n.allocation}
	if n.offline != nil {
		loop.Offline = n.offline
	}
	if n.podCerts != nil {
		loop.PodCertificates = n.podCerts
	}
	n.main, err = syncloop.New(loop)
	return err
}

// admissionChain is upstream's order of admission handlers (NewMainKubelet):
// eviction, sysctls, resource allocation (the topology manager over its
// providers: devices, CPUs, memory), the node's predicates (with the
// critical pods' preemption), shutdown. A refused pod's devices, CPUs and
// memory are released.
func (n *Nodelet) admissionChain() *admission.Chain {
	handlers := []admission.Named{
		{Name: "eviction", Handler: n.eviction},
		{Name: "declared-features", Handler: n.declared},
		{Name: "sysctls", Handler: n.sysctls},
		{Name: "pod-level-resources", Handler: admission.PodLevelResourcesGate{On: config.GateOn(&n.opts.Config, "PodLevelResources")}},
		{Name: "topology-manager", Handler: n.topology},
		// The device plugins' allocatable as it is now: the Node's status
		// may not carry it yet.
		// A critical pod short of resources preempts others.
		{Name: "predicates", Handler: admission.Predicates{Node: n.admissionNode, Fresh: n.freshNode, Allocatable: n.devices.AdmissionAllocatable, Preemption: n.preemption}},
	}
	if n.shutdown != nil {
		handlers = append(handlers, admission.Named{Name: "shutdown", Handler: n.shutdown})
	}
	c := admission.NewChain(handlers...)
	c.OnReject(func(p *v1.Pod, _ admission.Result) {
		n.cpus.Release(context.Background(), string(p.UID))
		n.devices.Release(p.UID)
		n.mems.Release(context.Background(), string(p.UID))
		n.topology.Release(string(p.UID))
	})
	return c
}

// newCPUManager is the CPU manager of the configuration's policy, on the
// machine's CPU topology; the static policy's reservation is the node
// allocatable reservation's cpu (reservedSystemCPUs already folded in),
// its pods the resource holders.
func (n *Nodelet) newCPUManager(rs internalapi.RuntimeService, alignment *topologymanager.AlignmentMetrics) (*cpumanager.Manager, error) {
	cfg := &n.opts.Config
	topo, err := cpumanager.Discover("/")
	if err != nil {
		if cfg.CPUManagerPolicy == cpumanager.PolicyStatic {
			return nil, err
		}
		topo = cpumanager.NewTopology(cpumanager.CPUDetails{}) // the none policy does not need it
	}
	reservation, err := n.reservation()
	if err != nil {
		return nil, err
	}
	m, err := cpumanager.New(cpumanager.Config{Policy: cfg.CPUManagerPolicy, Options: cfg.CPUManagerPolicyOptions,
		AlphaOptions: config.GateOn(cfg, "CPUManagerPolicyAlphaOptions"), BetaOptions: config.GateOn(cfg, "CPUManagerPolicyBetaOptions"),
		ReservedSystemCPUs: cfg.ReservedSystemCPUs, Reserved: reservation[v1.ResourceCPU], ReconcilePeriod: cfg.CPUManagerReconcilePeriod.Duration,
		Dir: n.opts.RootDir, Topology: topo, ActivePods: func() []*v1.Pod { return n.view.ResourceHolders() },
		SourcesReady: n.sourcesReady.IsReady, Runtime: rs, TopologyPolicy: cfg.TopologyManagerPolicy, Registerer: n.registerer,
		Alignment: alignment, Clock: n.clock})
	if err != nil {
		return nil, fmt.Errorf("cpu manager (cpuManagerPolicy %q): %w", cfg.CPUManagerPolicy, err)
	}
	return m, nil
}

// newMemoryManager is the memory manager of the configuration's policy,
// on the machine's NUMA nodes, its reservation checked against the node
// allocatable reservation, its pods the resource holders.
func (n *Nodelet) newMemoryManager() (*memorymanager.Manager, error) {
	cfg := &n.opts.Config
	var nodes []memorymanager.NUMANode
	if cfg.MemoryManagerPolicy == memorymanager.PolicyStatic {
		var err error
		if nodes, err = memorymanager.Discover("/"); err != nil {
			return nil, err
		}
	}
	reservation, err := n.reservation()
	if err != nil {
		return nil, err
	}
	m, err := memorymanager.New(memorymanager.Config{Policy: cfg.MemoryManagerPolicy, ReservedMemory: cfg.ReservedMemory,
		NodeReservation: reservation, Nodes: nodes, Dir: n.opts.RootDir, ActivePods: func() []*v1.Pod { return n.view.ResourceHolders() },
		SourcesReady: n.sourcesReady.IsReady, Registerer: n.registerer, Clock: n.clock})
	if err != nil {
		return nil, fmt.Errorf("memory manager (memoryManagerPolicy %q): %w", cfg.MemoryManagerPolicy, err)
	}
	return m, nil
}

// reservation is the node allocatable reservation of the configuration
// on this machine.
func (n *Nodelet) reservation() (v1.ResourceList, error) {
	cfg := &n.opts.Config
	return machine.Reservation(n.machine.Capacity(), cfg.KubeReserved, cfg.SystemReserved, cfg.EvictionHard)
}

// setupCluster creates the components that talk to the API server.
func (n *Nodelet) setupCluster(rs internalapi.RuntimeService, is internalapi.ImageManagerService) error {
	var err error
	if n.apiSource, err = apiserver.New(apiserver.Config{Client: n.client, NodeName: n.opts.NodeName}); err != nil {
		return err
	}
	if n.nodeStatus, err = nodestatus.New(nodestatus.Config{
		Client: n.client, NodeName: n.opts.NodeName, NodeIPs: n.hostIPs, Labels: n.opts.NodeLabels,
		NodeIPSpecified: machine.NodeIPSpecified(n.opts.NodeIP), ExternalCloudProvider: n.opts.CloudProvider == config.ExternalCloudProvider,
		Kubelet: &n.opts.Config, Runtime: rs, Images: is, Machine: n.machine, Clock: n.clock, Recorder: n.recorder,
		RuntimeHandlers: n.runtime.Features().NodeRuntimeHandlers, Features: n.runtime.Features().NodeFeatures, DeclaredFeatures: n.declared.Names(),
		Pressure: n.eviction, ShuttingDown: n.shuttingDown, VolumesInUse: n.csiVolumes.InUse, DeviceResources: n.devices.Resources,
	}); err != nil {
		return err
	}
	if n.mirrors, err = mirror.New(mirror.Config{Client: n.client, Lister: n.apiSource.Lister(), Node: n.nodeStatus.Node}); err != nil {
		return err
	}
	sc := status.SyncerConfig{Client: n.client, Lister: n.apiSource.Lister(), Store: n.statuses, Clock: n.clock}
	if n.dra != nil {
		sc.HoldTerminal = n.dra.PodMightNeedToUnprepareResources
	}
	n.syncer, err = status.NewSyncer(sc)
	return err
}

// newEviction is the eviction manager of the configuration's thresholds,
// observing the stats summary and evicting through the pod workers; the
// memory notifiers wake it when memory crosses a threshold.
func (n *Nodelet) newEviction(ctx context.Context) (*eviction.Manager, error) {
	cfg := &n.opts.Config
	thresholds, err := eviction.ParseThresholds(eviction.Settings{
		Hard: cfg.EvictionHard, Soft: cfg.EvictionSoft, SoftGracePeriod: cfg.EvictionSoftGracePeriod, MinimumReclaim: cfg.EvictionMinimumReclaim,
		PodsAllocatable: *cfg.CgroupsPerQOS && slices.Contains(cfg.EnforceNodeAllocatable, "pods"),
	})
	if err != nil {
		return nil, fmt.Errorf("eviction thresholds: %w", err)
	}
	notifiers, err := eviction.MemoryNotifiers(thresholds, eviction.NotifiersConfig{Cgroups: n.machine.Cgroups, PodsCgroup: n.cgroups.PodsCgroup(),
		NodeMemoryUsage: n.stats.NodeMemoryUsage, PodsMemoryUsage: n.stats.PodsMemoryUsage, Clock: n.clock})
	if err != nil {
		klog.FromContext(ctx).Info("Memory pressure is observed every period only", "err", err)
	}
	return eviction.New(eviction.Config{
		Thresholds: thresholds, PressureTransitionPeriod: cfg.EvictionPressureTransitionPeriod.Duration, Summary: n.stats,
		Recorder: n.recorder, Node: n.nodeRef(), NodeReclaim: []eviction.Reclaimer{containerReclaim{n}, n.imageGC},
		ActivePods: func() []*v1.Pod { return n.view.Running() },
		Evictor:    evictor{n}, MaxPodGracePeriod: int64(cfg.EvictionMaxPodGracePeriod), MemoryNotifiers: notifiers,
		QuickSummary: n.stats.QuickSummary, Clock: n.clock,
	})
}

// systemContainers are the summary's kubelet system container and, with
// --runtime-cgroups, the runtime's.
func (n *Nodelet) systemContainers(ctx context.Context) []stats.SystemContainer {
	if n.machine.Cgroups.Mount == "" {
		return nil
	}
	var out []stats.SystemContainer
	if kubelet, err := cgroups.KubeletCgroup(n.opts.Config.KubeletCgroups, n.machine.Cgroups.V2); err != nil {
		klog.FromContext(ctx).Info("The summary has no kubelet system container", "err", err)
	} else {
		out = append(out, stats.SystemContainer{Name: statsv1alpha1.SystemContainerKubelet, Cgroup: kubelet, Start: n.clock.Now()})
	}
	if n.opts.RuntimeCgroups != "" {
		out = append(out, stats.SystemContainer{Name: statsv1alpha1.SystemContainerRuntime, Cgroup: n.opts.RuntimeCgroups})
	}
	return out
}

// newStats is the /stats/summary and /metrics/resource provider; the
// /metrics/resource scrapes log to ctx's logger.
func (n *Nodelet) newStats(ctx context.Context, rs internalapi.RuntimeService, is internalapi.ImageManagerService) (*stats.Provider, error) {
	podsCgroup := ""
	if *n.opts.Config.CgroupsPerQOS {
		podsCgroup = n.cgroups.PodsCgroup()
	}
	return stats.New(stats.Config{
		NodeName: n.opts.NodeName, RootDir: n.opts.RootDir, PodLogsDir: n.opts.Config.PodLogsDir, Runtime: rs, Images: is, Clock: n.clock,
		Machine: n.machine, Logger: klog.FromContext(ctx), VolumeStatsAggPeriod: n.opts.Config.VolumeStatsAggPeriod.Duration, PodsCgroup: podsCgroup,
		DriverVolume: n.csiVolumes.SummaryStats, SystemContainers: n.systemContainers(ctx), KubeletStart: n.clock.Now(),
		Pods: func() []stats.PodInfo {
			var out []stats.PodInfo
			for _, p := range n.pods.Admitted("") {
				out = append(out, stats.PodInfo{Pod: p, VolumeDir: n.root.PodVolumes(p.UID)})
			}
			return out
		},
	})
}

// pruneRecords is the image GC's hook dropping the pull records of images
// gone (nil without records).
func pruneRecords(pulls *pullmanager.Manager) func(context.Context, []string, time.Time) {
	if pulls == nil {
		return nil
	}
	return pulls.PruneUnknownRecords
}

// registeredNodeObject is the Node as registered, nil before (the pod
// certificate requests carry its UID).
func (n *Nodelet) registeredNodeObject() *v1.Node {
	if n.nodeStatus == nil {
		return nil
	}
	return n.nodeStatus.Node()
}

// newDRA builds the DRA drivers' registry and the claim manager (cluster
// mode: claims live in the API server).
func (n *Nodelet) newDRA() error {
	cfg := &n.opts.Config
	var err error
	if n.draPlugins, err = dra.NewPlugins(dra.PluginsConfig{Client: n.client, NodeName: n.opts.NodeName,
		Registerer: n.registerer}); err != nil {
		return err
	}
	n.dra, err = dra.New(dra.Config{Client: n.client, Dir: n.opts.RootDir, Plugins: n.draPlugins,
		ActivePods: func() []*v1.Pod { return n.view.ResourceHolders() }, SourcesReady: n.sourcesReady.IsReady,
		OptionalNodeOperations: config.GateOn(cfg, "DRAOptionalNodeOperations"), PodGroupClaims: config.GateOn(cfg, "DRAWorkloadResourceClaims"),
		Registerer: n.registerer, Clock: n.clock})
	return err
}

// devicesHealthChanged has the pods using devices whose health a plugin
// reported synced again: their allocatedResourcesStatus follows.
func (n *Nodelet) devicesHealthChanged(uids []types.UID) {
	if n.workers == nil {
		return
	}
	for _, uid := range uids {
		n.workers.Notify(uid)
	}
}
