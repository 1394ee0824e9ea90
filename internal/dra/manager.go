package dra

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcev1 "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/dra/state"
)

// DefaultReconcilePeriod is how often the claims of pods no longer
// active are unprepared (upstream's defaultReconcilePeriod).
const DefaultReconcilePeriod = 60 * time.Second

// Client is the API group the DRA side of the node uses: ResourceClaims
// (read) and ResourceSlices (deleted for drivers gone). The clientset and
// nodelet's apiclient.Interface satisfy it.
type Client interface {
	ResourceV1() resourcev1.ResourceV1Interface
}

// Config configures a Manager.
type Config struct {
	// Client reads the pods' ResourceClaims. Required.
	Client Client
	// Dir holds the checkpoint (the root directory). Required.
	Dir string
	// Plugins are the drivers' plugins. Required.
	Plugins *Plugins
	// ActivePods are the admitted pods not finished: the claims of the
	// others are unprepared by the reconcile loop. Required.
	ActivePods func() []*v1.Pod
	// SourcesReady reports whether every pod source has been seen.
	// Required.
	SourcesReady func() bool
	// ReconcilePeriod defaults to DefaultReconcilePeriod.
	ReconcilePeriod time.Duration
	// OptionalNodeOperations is the DRAOptionalNodeOperations gate: an
	// allocation whose results skip node operations is refused without
	// it.
	OptionalNodeOperations bool
	// PodGroupClaims is the DRAWorkloadResourceClaims gate: claims owned
	// by or reserved for the pod's PodGroup count as the pod's.
	PodGroupClaims bool
	// Registerer takes upstream's dra_* metrics (none when nil).
	Registerer prometheus.Registerer
	// Clock defaults to the real clock.
	Clock clock.WithTicker
}

// Manager prepares the ResourceClaims of the node's pods through their
// drivers' plugins and unprepares them when no pod of the node uses them
// any more (upstream's DRA manager). Safe for concurrent use.
type Manager struct {
	cfg     Config
	cache   *claimCache
	metrics *metrics
	// waiting, when set (tests), hears a call start waiting for another
	// pod's preparation of a claim.
	waiting func()
}

// New returns the manager, its claims read from the checkpoint.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("dra: Config.Client is required")
	case cfg.Dir == "":
		return nil, errors.New("dra: Config.Dir is required")
	case cfg.Plugins == nil:
		return nil, errors.New("dra: Config.Plugins is required")
	case cfg.ActivePods == nil:
		return nil, errors.New("dra: Config.ActivePods is required")
	case cfg.SourcesReady == nil:
		return nil, errors.New("dra: Config.SourcesReady is required")
	}
	if cfg.ReconcilePeriod <= 0 {
		cfg.ReconcilePeriod = DefaultReconcilePeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	cache, err := loadClaims(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("create ResourceClaim cache: %w", err)
	}
	m := &Manager{cfg: cfg, cache: cache}
	m.metrics = newMetrics(cfg.Registerer, m.claimsInUse)
	return m, nil
}

// Run unprepares the claims of pods no longer active every period, until
// ctx is done.
func (m *Manager) Run(ctx context.Context) error {
	t := m.cfg.Clock.NewTicker(m.cfg.ReconcilePeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			m.Reconcile(ctx)
		}
	}
}

// Reconcile unprepares the claims of the pods that are no longer active
// (upstream's reconcileLoop), once every source is ready.
func (m *Manager) Reconcile(ctx context.Context) {
	if !m.cfg.SourcesReady() {
		return
	}
	active := map[string]bool{}
	for _, p := range m.cfg.ActivePods() {
		active[string(p.UID)] = true
	}
	type podClaims struct {
		namespace string
		names     []string
	}
	inactive := map[string]*podClaims{}
	m.cache.mu.RLock()
	for _, info := range m.cache.claims {
		for uid := range info.PodUIDs {
			if active[uid] {
				continue
			}
			if inactive[uid] == nil {
				inactive[uid] = &podClaims{namespace: info.Namespace}
			}
			inactive[uid].names = append(inactive[uid].names, info.ClaimName)
		}
	}
	m.cache.mu.RUnlock()
	for uid, pc := range inactive {
		if err := m.unprepare(ctx, types.UID(uid), pc.namespace, pc.names); err != nil {
			klog.FromContext(ctx).Info("Unpreparing pod resources in reconcile loop failed, will retry", "podUID", uid, "err", err)
		}
	}
}

// podClaims are the pod's claims to prepare: its spec's, and the claim
// the scheduler made for its DRA-backed extended resources.
func podClaims(pod *v1.Pod) []v1.PodResourceClaim {
	claims := pod.Spec.ResourceClaims
	if s := pod.Status.ExtendedResourceClaimStatus; s != nil {
		claims = append(append([]v1.PodResourceClaim{}, claims...), v1.PodResourceClaim{ResourceClaimName: &s.ResourceClaimName})
	}
	return claims
}

// NeedsPreparation reports whether the pod has claims to prepare.
func NeedsPreparation(pod *v1.Pod) bool { return len(podClaims(pod)) > 0 }

// PrepareResources prepares the pod's claims (upstream's
// PrepareResources): each must be allocated and reserved for the pod,
// and its drivers registered; the claims new to the node are prepared by
// their drivers, one NodePrepareResources call per driver, and
// checkpointed with the CDI devices the drivers returned. A claim already
// prepared for another pod of the node is shared.
func (m *Manager) PrepareResources(ctx context.Context, pod *v1.Pod) error {
	start := m.cfg.Clock.Now()
	err := m.prepare(ctx, pod)
	m.metrics.operations.WithLabelValues("PrepareResources", strconv.FormatBool(err != nil)).Observe(m.cfg.Clock.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("prepare dynamic resources: %w", err)
	}
	return nil
}

// toPrepare is one of the pod's claims: the claim, its new info, and its
// drivers' plugins.
type toPrepare struct {
	claim   *resourceapi.ResourceClaim
	info    *claimInfo
	plugins map[string]*Plugin
}

func (m *Manager) prepare(ctx context.Context, pod *v1.Pod) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pod", klog.KObj(pod))
	// A validation pass that changes nothing: a pod that cannot be
	// prepared (its driver never installed) can be deleted without
	// unpreparing anything.
	var claims []toPrepare
	for _, pc := range podClaims(pod) {
		name, mustCheckOwner, err := resourceclaim.Name(pod, &pc)
		if err != nil {
			return err
		}
		if name == nil {
			continue
		}
		claim, err := m.cfg.Client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, *name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("fetch ResourceClaim %s: %w", *name, err)
		}
		if mustCheckOwner {
			if err := resourceclaim.IsForPod(pod, claim, m.cfg.PodGroupClaims); err != nil {
				return err
			}
		}
		if !resourceclaim.IsReservedForPod(pod, claim, m.cfg.PodGroupClaims) {
			return fmt.Errorf("pod %s (%s) is not allowed to use ResourceClaim %s (%s)", pod.Name, pod.UID, *name, claim.UID)
		}
		info, err := newClaimInfo(claim, m.cfg.OptionalNodeOperations)
		if err != nil {
			return fmt.Errorf("ResourceClaim %s: %w", claim.Name, err)
		}
		tp := toPrepare{claim: claim, info: info, plugins: map[string]*Plugin{}}
		for driver, ds := range info.DriverState {
			if ds.Skips(resourceapi.SkipNodeOperationNodePrepareResources) {
				continue
			}
			if tp.plugins[driver], err = m.cfg.Plugins.Get(driver); err != nil {
				return err
			}
		}
		claims = append(claims, tp)
	}

	if len(claims) == 0 {
		return nil // most pods: nothing to prepare, nothing to write
	}

	// The claims join the cache with the pod's reference, checkpointed
	// before any driver is called. A claim another pod of the node is
	// preparing at the same time is waited for, not prepared twice
	// (upstream calls the driver once per pod then).
	var batches map[*Plugin][]*drapb.Claim
	var pending map[types.UID]pendingClaim
	var mine []*claimInfo // the claims whose preparation this call owns
	defer func() {
		m.cache.mu.Lock()
		defer m.cache.mu.Unlock()
		for _, info := range mine {
			close(info.preparing)
			info.preparing = nil
		}
	}()
	for {
		var busy chan struct{}
		batches, pending = map[*Plugin][]*drapb.Claim{}, map[types.UID]pendingClaim{}
		err := m.register(logger, pod, claims, batches, pending, &mine, &busy)
		if err != nil {
			return err
		}
		if busy == nil {
			break
		}
		if m.waiting != nil {
			m.waiting()
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return ctx.Err()
		}
	}

	for plugin, reqs := range batches {
		resp, err := plugin.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: reqs})
		if err != nil {
			return fmt.Errorf("NodePrepareResources: %w", err)
		}
		for uid, result := range resp.Claims {
			req := lookupClaim(reqs, uid)
			if req == nil {
				return fmt.Errorf("NodePrepareResources returned result for unknown claim UID %s", uid)
			}
			if result.GetError() != "" {
				return fmt.Errorf("NodePrepareResources failed for ResourceClaim %s: %s", req.Name, result.Error)
			}
			pc := pending[types.UID(uid)]
			claim := pc.claim
			m.cache.mu.Lock()
			info, ok := m.cache.get(claim.Namespace, claim.Name)
			ok = ok && info == pc.info // not unprepared (and added again) meanwhile
			if ok {
				info.resetDevices(plugin.Driver())
				for _, d := range result.GetDevices() {
					info.addDevice(plugin.Driver(), state.Device{PoolName: d.PoolName, DeviceName: d.DeviceName,
						ShareID: (*types.UID)(d.ShareId), RequestNames: d.RequestNames, CDIDeviceIDs: d.CdiDeviceIds})
				}
			}
			m.cache.mu.Unlock()
			if !ok {
				return fmt.Errorf("internal error: unable to get claim info for ResourceClaim %s in namespace %s", claim.Name, claim.Namespace)
			}
		}
		if unfinished := len(reqs) - len(resp.Claims); unfinished != 0 {
			return fmt.Errorf("NodePrepareResources skipped %d ResourceClaims", unfinished)
		}
	}

	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	for _, pc := range pending {
		claim := pc.claim
		info, ok := m.cache.get(claim.Namespace, claim.Name)
		if !ok || info != pc.info {
			return fmt.Errorf("internal error: unable to get claim info for ResourceClaim %s in namespace %s", claim.Name, claim.Namespace)
		}
		info.prepared = true
	}
	if err := m.cache.store(); err != nil {
		return fmt.Errorf("checkpoint ResourceClaim state: %w", err)
	}
	if len(pending) > 0 {
		logger.V(2).Info("Prepared the pod's ResourceClaims", "claims", len(pending), "drivers", len(batches))
	}
	return nil
}

// pendingClaim is a claim a prepare call has its drivers prepare: the
// claim, and its info in the cache when the call began (a claim
// unprepared meanwhile has another, or none).
type pendingClaim struct {
	claim *resourceapi.ResourceClaim
	info  *claimInfo
}

// register adds the pod's reference to its claims (new claims join the
// cache) and checkpoints, and puts the claims not prepared yet in the
// drivers' batches, their preparation owned (mine) until prepare returns.
// When a claim is being prepared by another call, nothing changes and busy
// is the channel closed once that call is done.
func (m *Manager) register(logger klog.Logger, pod *v1.Pod, claims []toPrepare, batches map[*Plugin][]*drapb.Claim,
	pending map[types.UID]pendingClaim, mine *[]*claimInfo, busy *chan struct{}) error {
	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	for _, tp := range claims {
		if info, ok := m.cache.get(tp.claim.Namespace, tp.claim.Name); ok && !info.prepared && info.preparing != nil {
			*busy = info.preparing
			return nil
		}
	}
	for _, tp := range claims {
		info, ok := m.cache.get(tp.claim.Namespace, tp.claim.Name)
		if !ok {
			info = tp.info
			m.cache.claims[claimKey(info.Namespace, info.ClaimName)] = info
		} else {
			if info.ClaimUID != tp.claim.UID {
				return fmt.Errorf("old ResourceClaim with same name %s and different UID %s still exists (previous pod force-deleted?!)", tp.claim.Name, info.ClaimUID)
			}
			if info.unpreparing {
				return fmt.Errorf("ResourceClaim %s is being unprepared", tp.claim.Name)
			}
		}
		info.PodUIDs.Insert(string(pod.UID))
		if err := m.cache.store(); err != nil {
			return fmt.Errorf("checkpoint ResourceClaim cache: %w", err)
		}
		if info.prepared {
			logger.V(5).Info("Resources already prepared", "claim", klog.KObj(tp.claim))
			continue
		}
		pending[info.ClaimUID] = pendingClaim{claim: tp.claim, info: info}
		if info.preparing == nil {
			info.preparing = make(chan struct{})
			*mine = append(*mine, info)
		}
		req := &drapb.Claim{Namespace: info.Namespace, Uid: string(info.ClaimUID), Name: info.ClaimName}
		for driver, ds := range info.DriverState {
			if ds.Skips(resourceapi.SkipNodeOperationNodePrepareResources) {
				m.metrics.prepareSkips.WithLabelValues(driver).Inc()
				continue
			}
			batches[tp.plugins[driver]] = append(batches[tp.plugins[driver]], req)
		}
	}
	return nil
}

func lookupClaim(claims []*drapb.Claim, uid string) *drapb.Claim {
	for _, c := range claims {
		if c.Uid == uid {
			return c
		}
	}
	return nil
}

// ContainerCDIDevices are the CDI device IDs a container gets: those of
// the claim requests it names in resources.claims, and of the extended
// resources it asks that the scheduler mapped to requests of the pod's
// extended resource claim (upstream's GetResources).
func (m *Manager) ContainerCDIDevices(pod *v1.Pod, c *v1.Container) ([]string, error) {
	requests := map[string][]string{} // claim name -> request names ("" all)
	byPodClaim := map[string][]string{}
	for _, cc := range c.Resources.Claims {
		byPodClaim[cc.Name] = append(byPodClaim[cc.Name], cc.Request)
	}
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		reqs, ok := byPodClaim[pc.Name]
		if !ok {
			continue
		}
		name, _, err := resourceclaim.Name(pod, pc)
		if err != nil {
			return nil, err
		}
		if name != nil {
			requests[*name] = append(requests[*name], reqs...)
		}
	}
	if s := pod.Status.ExtendedResourceClaimStatus; s != nil {
		asked := map[string]bool{}
		for name, q := range c.Resources.Requests {
			if !q.IsZero() {
				asked[string(name)] = true
			}
		}
		for _, rm := range s.RequestMappings {
			if rm.ContainerName == c.Name && asked[rm.ResourceName] {
				requests[s.ResourceClaimName] = append(requests[s.ResourceClaimName], rm.RequestName)
			}
		}
	}
	m.cache.mu.RLock()
	defer m.cache.mu.RUnlock()
	var out []string
	for name, reqs := range requests {
		info, ok := m.cache.get(pod.Namespace, name)
		if !ok {
			return nil, fmt.Errorf("internal error: unable to get claim info for ResourceClaim %s in namespace %s", name, pod.Namespace)
		}
		for _, r := range reqs {
			out = append(out, info.cdiDevices(r)...)
		}
	}
	return out, nil
}

// UnprepareResources releases the pod's claims (upstream's
// UnprepareResources): a claim other pods of the node still use only
// loses this pod; the others are unprepared by their drivers, one call
// per driver, and leave the checkpoint. Idempotent.
func (m *Manager) UnprepareResources(ctx context.Context, pod *v1.Pod) error {
	start := m.cfg.Clock.Now()
	m.cache.mu.RLock()
	names := m.cache.namesForPod(pod.UID)
	m.cache.mu.RUnlock()
	var err error
	if len(names) == 0 {
		// The checkpoint may have been removed: the pod's own claims.
		for _, pc := range podClaims(pod) {
			name, _, nerr := resourceclaim.Name(pod, &pc)
			if nerr != nil {
				err = nerr
				break
			}
			if name != nil {
				names = append(names, *name)
			}
		}
	}
	if err == nil {
		err = m.unprepare(ctx, pod.UID, pod.Namespace, names)
	}
	m.metrics.operations.WithLabelValues("UnprepareResources", strconv.FormatBool(err != nil)).Observe(m.cfg.Clock.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("unprepare dynamic resources: %w", err)
	}
	return nil
}

func (m *Manager) unprepare(ctx context.Context, podUID types.UID, namespace string, names []string) error {
	if len(names) == 0 {
		return nil // most pods: no claims, nothing to write
	}
	batches := map[string][]*drapb.Claim{}
	done := map[types.UID]string{}
	m.cache.mu.Lock()
	// A claim a prepare call is working on is left to a later call (the
	// pod's stop or the reconcile loop retries): never unprepared while
	// its driver prepares it.
	for _, name := range names {
		if info, ok := m.cache.get(namespace, name); ok && info.PodUIDs.Has(string(podUID)) && info.preparing != nil {
			m.cache.mu.Unlock()
			return fmt.Errorf("ResourceClaim %s is being prepared", name)
		}
	}
	for _, name := range names {
		info, ok := m.cache.get(namespace, name)
		if !ok || !info.PodUIDs.Has(string(podUID)) {
			continue
		}
		if info.PodUIDs.Len() > 1 {
			info.PodUIDs.Delete(string(podUID))
			continue
		}
		done[info.ClaimUID] = info.ClaimName
		info.unpreparing = true
		req := &drapb.Claim{Namespace: info.Namespace, Uid: string(info.ClaimUID), Name: info.ClaimName}
		for driver, ds := range info.DriverState {
			if ds.Skips(resourceapi.SkipNodeOperationNodeUnprepareResources) {
				m.metrics.unprepareSkips.WithLabelValues(driver).Inc()
				continue
			}
			batches[driver] = append(batches[driver], req)
		}
	}
	m.cache.mu.Unlock()

	for driver, reqs := range batches {
		plugin, err := m.cfg.Plugins.Get(driver)
		if err != nil {
			return err
		}
		resp, err := plugin.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: reqs})
		if err != nil {
			return fmt.Errorf("NodeUnprepareResources: %w", err)
		}
		for uid, result := range resp.Claims {
			req := lookupClaim(reqs, uid)
			if req == nil {
				return fmt.Errorf("NodeUnprepareResources returned result for unknown claim UID %s", uid)
			}
			if result.GetError() != "" {
				return fmt.Errorf("NodeUnprepareResources failed for ResourceClaim %s: %s", req.Name, result.Error)
			}
		}
		if unfinished := len(reqs) - len(resp.Claims); unfinished != 0 {
			return fmt.Errorf("NodeUnprepareResources skipped %d ResourceClaims", unfinished)
		}
	}

	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	for _, name := range done {
		delete(m.cache.claims, claimKey(namespace, name))
	}
	if err := m.cache.store(); err != nil {
		return fmt.Errorf("checkpoint ResourceClaim state: %w", err)
	}
	if len(done) > 0 {
		klog.FromContext(ctx).V(2).Info("Unprepared ResourceClaims", "podUID", podUID, "claims", len(done))
	}
	return nil
}

// PodMightNeedToUnprepareResources reports whether a claim of the node
// still references the pod.
func (m *Manager) PodMightNeedToUnprepareResources(uid types.UID) bool {
	m.cache.mu.RLock()
	defer m.cache.mu.RUnlock()
	return len(m.cache.namesForPod(uid)) > 0
}

func (m *Manager) claimsInUse() map[string]int {
	m.cache.mu.RLock()
	defer m.cache.mu.RUnlock()
	return m.cache.inUse()
}

// metrics are upstream's DRA manager metrics, same names.
type metrics struct {
	operations                   *prometheus.HistogramVec
	prepareSkips, unprepareSkips *prometheus.CounterVec
}

// claimsInUseCollector is dra_resource_claims_in_use, computed when
// scraped (only the drivers with prepared claims are listed).
type claimsInUseCollector struct {
	desc  *prometheus.Desc
	count func() map[string]int
}

func (c claimsInUseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c claimsInUseCollector) Collect(ch chan<- prometheus.Metric) {
	for driver, n := range c.count() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), driver)
	}
}

func newMetrics(reg prometheus.Registerer, inUse func() map[string]int) *metrics {
	m := &metrics{
		operations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "dra", Name: "operations_duration_seconds",
			Help:    "[ALPHA] Latency histogram in seconds for the duration of handling all ResourceClaims referenced by a pod when the pod starts or stops. Identified by the name of the operation (PrepareResources or UnprepareResources) and separated by the success of the operation. The number of failed operations is provided through the histogram's overall count.",
			Buckets: prometheus.ExponentialBucketsRange(.1, 40, 15)}, []string{"operation_name", "is_error"}),
		prepareSkips: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "dra", Name: "node_prepare_skips_total",
			Help: "[ALPHA] Cumulative number of times NodePrepareResources gRPC calls were skipped due to SkipNodeOperations."}, []string{"driver_name"}),
		unprepareSkips: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "dra", Name: "node_unprepare_skips_total",
			Help: "[ALPHA] Cumulative number of times NodeUnprepareResources gRPC calls were skipped due to SkipNodeOperations."}, []string{"driver_name"}),
	}
	if reg != nil {
		reg.MustRegister(m.operations, m.prepareSkips, m.unprepareSkips, claimsInUseCollector{
			desc: prometheus.NewDesc("dra_resource_claims_in_use",
				"[ALPHA] The number of ResourceClaims that are currently in use on the node, by driver name (driver_name label value) and across all drivers (special value <any> for driver_name). Note that the sum of all by-driver counts is not the total number of in-use ResourceClaims because the same ResourceClaim might use devices from different drivers. Instead, use the count for the <any> driver_name.",
				[]string{"driver_name"}, nil),
			count: inUse,
		})
	}
	return m
}
