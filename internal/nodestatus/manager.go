package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodelet/nodelet/internal/apiclient"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-helpers/apimachinery/lease"
	nodeutil "k8s.io/component-helpers/node/util"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/lifecycle"
	"github.com/nodelet/nodelet/internal/machine"
	"github.com/nodelet/nodelet/internal/version"
)

// KubeletVersion is the kubelet version nodelet reports: the API it
// implements.
const KubeletVersion = version.Kubelet

// Config configures a Manager.
type Config struct {
	Client   apiclient.Interface
	NodeName string
	NodeIPs  []string
	// RuntimeHandlers and Features are the runtime's handlers and
	// features as the Node reports them (status.runtimeHandlers,
	// status.features); nil: not reported.
	RuntimeHandlers func(ctx context.Context) []v1.NodeRuntimeHandler
	Features        func(ctx context.Context) *v1.NodeFeatures
	// DeclaredFeatures are the node's declared features
	// (status.declaredFeatures, admission.DeclaredFeatures).
	DeclaredFeatures []string
	// NodeIPSpecified: NodeIPs came from --node-ip (not detected).
	NodeIPSpecified bool
	// ExternalCloudProvider is --cloud-provider=external: the node
	// registers with upstream's uninitialized taint, its --node-ip goes in
	// the alpha.kubernetes.io/provided-node-ip annotation, and addresses
	// the cloud controller manager set are kept.
	ExternalCloudProvider bool
	// Labels are --node-labels.
	Labels  map[string]string
	Kubelet *kubeletv1beta1.KubeletConfiguration
	Runtime internalapi.RuntimeService
	Images  internalapi.ImageManagerService
	// Machine is the machine's facts: capacity (ephemeral storage
	// included) and nodeInfo.
	Machine machine.Facts
	Clock   clock.WithTicker
	// Recorder records node events.
	Recorder record.EventRecorder
	// Pressure gives the node's pressure conditions (the eviction
	// manager); nil reports none.
	Pressure Pressure
	// ShuttingDown makes the node not ready with its error while the
	// machine shuts down (the shutdown manager); nil: never.
	ShuttingDown func() error
	// VolumesInUse lists the attachable volumes mounted for pods (the CSI
	// volume plugin), reported so the attach-detach controller does not
	// detach them; nil reports none.
	VolumesInUse func() []v1.UniqueVolumeName
	// DeviceResources are the device plugins' extended resources
	// (capacity, allocatable); nil reports none.
	DeviceResources func() (capacity, allocatable v1.ResourceList)
}

// Pressure is what the node's pressure conditions come from.
type Pressure interface {
	// Conditions are the pressure conditions that hold (MemoryPressure,
	// DiskPressure, PIDPressure).
	Conditions() []v1.NodeConditionType
	// Changed is signalled when they change.
	Changed() <-chan struct{}
}

// Manager registers and reports the Node.
type Manager struct {
	cfg Config
	// The Node as the API server has it, watched (one long request instead
	// of a GET every period), so a status others wrote (the node lifecycle
	// controller's Unknown) is seen and corrected at once.
	informer cache.SharedIndexInformer
	lister   corelisters.NodeLister
	changed  chan struct{}

	mu   sync.RWMutex
	node *v1.Node
	// registered is closed once the Node is known (Registered).
	registered lifecycle.Ready

	// apiTrouble is set when a heartbeat or a status write failed: the
	// watch may be stale too, so the next updates read the Node afresh
	// until one succeeds (after an API server outage the node lifecycle
	// controller has marked the node Unknown, and only we can undo that).
	apiTrouble atomic.Bool

	// Owned by Run.
	lastReport time.Time
	lastReady  *bool
	podCIDR    string // given to the runtime
}

// New returns a Manager for cfg. It fails when cfg has no Client,
// NodeName, Kubelet, Runtime, Images or Recorder.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("nodestatus: Config.Client is required")
	case cfg.NodeName == "":
		return nil, errors.New("nodestatus: Config.NodeName is required")
	case cfg.Kubelet == nil:
		return nil, errors.New("nodestatus: Config.Kubelet is required")
	case cfg.Runtime == nil:
		return nil, errors.New("nodestatus: Config.Runtime is required")
	case cfg.Images == nil:
		return nil, errors.New("nodestatus: Config.Images is required")
	case cfg.Recorder == nil:
		return nil, errors.New("nodestatus: Config.Recorder is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	m := &Manager{cfg: cfg, changed: make(chan struct{}, 1)}
	nodes := cfg.Client.CoreV1().Nodes()
	inf := cache.NewSharedIndexInformer(apiclient.ListWatch(cfg.Client, nodes.List, nodes.Watch, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.NodeName).String()
	}), &v1.Node{}, 0, cache.Indexers{})
	m.informer = inf
	m.lister = corelisters.NewNodeLister(inf.GetIndexer())
	poke := func(any) {
		select {
		case m.changed <- struct{}{}:
		default:
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(_, cur any) { poke(cur) },
	})
	return m, nil
}

// Refresh makes Run compute and report the status now (a shutdown began or
// was cancelled).
func (m *Manager) Refresh() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// Node returns the latest Node object, nil before registration.
func (m *Manager) Node() *v1.Node {
	m.mu.RLock()
	n := m.node
	m.mu.RUnlock()
	if n == nil || m.lister == nil {
		return n
	}
	// What the API has now (its informer's copy, as upstream's GetNode):
	// labels and taints others changed since the last status report count
	// at admission.
	if cur, err := m.lister.Get(m.cfg.NodeName); err == nil && cur.UID == n.UID {
		return cur
	}
	return n
}

// Fresh reads the Node from the API server (nil when that fails or before
// registration): for a decision the informer's copy may be too old for.
func (m *Manager) Fresh(ctx context.Context) *v1.Node {
	if m.Node() == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := m.cfg.Client.CoreV1().Nodes().Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Cannot read the Node from the API server", "node", m.cfg.NodeName, "err", err)
		return nil
	}
	return n
}

// Registered is closed once the Node is known (registered, or read back
// from the API server): what waits for it waits on this channel.
func (m *Manager) Registered() <-chan struct{} { return m.registered.C() }

func (m *Manager) setNode(n *v1.Node) {
	m.mu.Lock()
	m.node = n
	m.mu.Unlock()
	if n != nil {
		m.registered.Close()
	}
}

// ref is the object reference node events point at, as upstream.
func (m *Manager) ref() *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: m.cfg.NodeName, UID: types.UID(m.cfg.NodeName)}
}

// Run registers the node (retrying until it succeeds), starts the lease and
// updates the status every nodeStatusUpdateFrequency until ctx is done.
func (m *Manager) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	m.cfg.Recorder.Eventf(m.ref(), v1.EventTypeNormal, "Starting", "Starting kubelet.")
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Cap: 7 * time.Second, Steps: 1 << 30}
	for ctx.Err() == nil {
		if err := m.register(ctx); err == nil {
			break
		} else {
			logger.Error(err, "Unable to register node with the API server; retrying", "node", m.cfg.NodeName)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-m.cfg.Clock.After(backoff.Step()):
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	go m.informer.Run(ctx.Done())
	m.update(ctx)

	leaseDuration := m.cfg.Kubelet.NodeLeaseDurationSeconds
	lc := lease.NewController(m.cfg.Clock, apiclient.LeaseClientset(m.cfg.Client), m.cfg.NodeName, leaseDuration, func() { m.apiTrouble.Store(true) },
		time.Duration(float64(leaseDuration)*0.25*float64(time.Second)), m.cfg.NodeName, v1.NamespaceNodeLease, m.setLeaseOwner)
	go lc.Run(ctx)

	t := m.cfg.Clock.NewTicker(m.cfg.Kubelet.NodeStatusUpdateFrequency.Duration)
	defer t.Stop()
	var pressureChanged <-chan struct{}
	if m.cfg.Pressure != nil {
		pressureChanged = m.cfg.Pressure.Changed()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			m.update(ctx)
		case <-m.changed:
			m.update(ctx)
		case <-pressureChanged:
			m.update(ctx)
		}
	}
}

// setLeaseOwner makes the lease owned by the Node, as upstream.
func (m *Manager) setLeaseOwner(l *coordinationv1.Lease) error {
	if len(l.OwnerReferences) > 0 {
		return nil
	}
	n := m.Node()
	if n == nil || n.UID == "" {
		return nil
	}
	l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
	return nil
}

func (m *Manager) initialNode() *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: m.cfg.NodeName,
			Labels: map[string]string{
				v1.LabelHostname:          m.cfg.NodeName,
				v1.LabelOSStable:          runtime.GOOS,
				v1.LabelArchStable:        runtime.GOARCH,
				"beta.kubernetes.io/os":   runtime.GOOS,
				"beta.kubernetes.io/arch": runtime.GOARCH,
			},
			Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
		},
		Spec: v1.NodeSpec{Taints: append([]v1.Taint(nil), m.cfg.Kubelet.RegisterWithTaints...)},
	}
	if m.cfg.ExternalCloudProvider {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule})
	}
	for k, v := range m.cfg.Labels {
		n.Labels[k] = v
	}
	if id := m.cfg.Kubelet.ProviderID; id != "" {
		n.Spec.ProviderID = id
	}
	return n
}

// register creates the Node, or adopts the existing one (reconciling the
// labels nodelet owns).
func (m *Manager) register(ctx context.Context) error {
	want := m.initialNode()
	m.fillStatus(ctx, want)
	if r := m.cfg.Kubelet.RegisterNode; r != nil && !*r {
		// --register-node=false: report the status of a Node someone else
		// created.
		existing, err := m.cfg.Client.CoreV1().Nodes().Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("registerNode is false and the node does not exist: %w", err)
		}
		m.setNode(existing)
		return nil
	}
	created, err := m.cfg.Client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		klog.FromContext(ctx).Info("Successfully registered node", "node", m.cfg.NodeName)
		m.setNode(created)
		m.recordPressureEvents(nil, created.Status.Conditions)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	existing, err := m.cfg.Client.CoreV1().Nodes().Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	changed := false
	updated := existing.DeepCopy()
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	for k, v := range want.Labels {
		if updated.Labels[k] != v {
			updated.Labels[k] = v
			changed = true
		}
	}
	if changed {
		if updated, err = m.cfg.Client.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	klog.FromContext(ctx).Info("Node was already registered; adopting it", "node", m.cfg.NodeName)
	m.setNode(updated)
	return nil
}

// update computes the status and patches it when it changed or the report
// period passed.
func (m *Manager) update(ctx context.Context) {
	old := m.Node()
	if old == nil {
		return
	}
	if m.apiTrouble.Load() {
		cur, err := m.cfg.Client.CoreV1().Nodes().Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return
		}
		m.apiTrouble.Store(false)
		old = cur
	} else if cur, err := m.lister.Get(m.cfg.NodeName); err == nil && cur.ResourceVersion != old.ResourceVersion {
		old = cur // what the API has now, others' writes included
	}
	m.syncPodCIDR(ctx, old)
	next := old.DeepCopy()
	m.fillStatus(ctx, next)
	now := m.cfg.Clock.Now()
	if apiequality.Semantic.DeepEqual(old.Status, next.Status) && now.Sub(m.lastReport) < m.cfg.Kubelet.NodeStatusReportFrequency.Duration {
		return
	}
	// Heartbeat times move only when the status is reported.
	for i := range next.Status.Conditions {
		next.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(now)
	}
	patched, _, err := nodeutil.PatchNodeStatus(m.cfg.Client.CoreV1(), types.NodeName(m.cfg.NodeName), old, next)
	if err != nil {
		m.apiTrouble.Store(true)
		klog.FromContext(ctx).Error(err, "Error updating node status; will retry", "node", m.cfg.NodeName)
		if apierrors.IsNotFound(err) {
			// Deleted from the API: register again.
			if err := m.register(ctx); err != nil {
				klog.FromContext(ctx).Error(err, "Unable to re-register the node")
			}
		}
		return
	}
	m.lastReport = now
	m.setNode(patched)
	m.recordPressureEvents(old.Status.Conditions, patched.Status.Conditions)
	m.recordReadyChange(patched)
}

// syncPodCIDR gives the runtime the Node's spec.podCIDRs when they change
// (the controller manager allocates them after registration), as upstream's
// updatePodCIDR: the runtime's CNI configuration may be templated on it.
func (m *Manager) syncPodCIDR(ctx context.Context, n *v1.Node) {
	cidrs := strings.Join(n.Spec.PodCIDRs, ",")
	if cidrs == "" || cidrs == m.podCIDR {
		return
	}
	if err := UpdatePodCIDR(ctx, m.cfg.Runtime, cidrs); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to update the runtime's pod CIDR; will retry", "podCIDR", cidrs)
		return
	}
	m.podCIDR = cidrs
}

// UpdatePodCIDR gives the runtime the node's pod CIDRs (comma-separated)
// through CRI UpdateRuntimeConfig: from the Node in cluster mode, from
// podCIDR in the configuration standalone, as upstream.
func UpdatePodCIDR(ctx context.Context, rs internalapi.RuntimeService, cidrs string) error {
	if err := rs.UpdateRuntimeConfig(ctx, &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: cidrs}}); err != nil {
		return fmt.Errorf("failed to update pod CIDR: %w", err)
	}
	klog.FromContext(ctx).Info("Updated Pod CIDR", "podCIDR", cidrs)
	return nil
}

// recordPressureEvents records the node events of the pressure conditions
// that changed from old to cur (all of them at registration, old nil).
func (m *Manager) recordPressureEvents(old, cur []v1.NodeCondition) {
	for _, reason := range pressureEvents(old, cur) {
		m.cfg.Recorder.Eventf(m.ref(), v1.EventTypeNormal, reason, "Node %s status is now: %s", m.cfg.NodeName, reason)
	}
}

func (m *Manager) recordReadyChange(n *v1.Node) {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			ready = c.Status == v1.ConditionTrue
		}
	}
	if m.lastReady == nil || *m.lastReady != ready {
		reason := "NodeNotReady"
		if ready {
			reason = "NodeReady"
		}
		m.cfg.Recorder.Eventf(m.ref(), v1.EventTypeNormal, reason, "Node %s status is now: %s", m.cfg.NodeName, reason)
		m.lastReady = ptr.To(ready)
	}
}

// Upstream's cloud provider names (k8s.io/cloud-provider/api).
const (
	TaintExternalCloudProvider = "node.cloudprovider.kubernetes.io/uninitialized"
	AnnotationProvidedIPAddr   = "alpha.kubernetes.io/provided-node-ip"
)

// setAddresses sets n's addresses as upstream's NodeAddress setter: the
// node IPs and the hostname. With an external cloud provider, a --node-ip
// is also published in the provided-node-ip annotation (removed
// otherwise), addresses already on the node (the cloud controller
// manager's) are kept, and without --node-ip only the hostname is reported
// until the cloud controller manager sets them.
func setAddresses(n *v1.Node, ips []string, ipSpecified bool, hostname string, external bool) {
	if external && ipSpecified && len(ips) > 0 {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[AnnotationProvidedIPAddr] = strings.Join(ips, ",")
	} else {
		delete(n.Annotations, AnnotationProvidedIPAddr)
	}
	if external {
		if len(n.Status.Addresses) > 0 {
			return
		}
		if !ipSpecified {
			n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: hostname}}
			return
		}
	}
	n.Status.Addresses = nil
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: hostname})
}

// fillStatus writes the node's current status into n.Status.
func (m *Manager) fillStatus(ctx context.Context, n *v1.Node) {
	cfg := m.cfg.Kubelet
	capacity := Capacity(m.cfg.Machine, cfg.MaxPods)
	alloc, err := Allocatable(capacity, cfg)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Bad reservation; reporting allocatable = capacity")
		alloc = capacity.DeepCopy()
	}
	if m.cfg.DeviceResources != nil {
		dc, da := m.cfg.DeviceResources()
		maps.Copy(capacity, dc)
		maps.Copy(alloc, da)
	}
	n.Status.Capacity = capacity
	n.Status.Allocatable = alloc
	setAddresses(n, m.cfg.NodeIPs, m.cfg.NodeIPSpecified, m.cfg.NodeName, m.cfg.ExternalCloudProvider)
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = cfg.Port

	runtimeVersion := "unknown"
	if v, err := m.cfg.Runtime.Version(ctx, "v1"); err == nil {
		runtimeVersion = v.RuntimeName + "://" + v.RuntimeVersion
	}
	n.Status.NodeInfo = v1.NodeSystemInfo{
		MachineID:               m.cfg.Machine.MachineID,
		SystemUUID:              m.cfg.Machine.SystemUUID,
		BootID:                  m.cfg.Machine.BootID,
		KernelVersion:           m.cfg.Machine.KernelVersion,
		OSImage:                 m.cfg.Machine.OSImage,
		ContainerRuntimeVersion: runtimeVersion,
		KubeletVersion:          KubeletVersion,
		OperatingSystem:         runtime.GOOS,
		Architecture:            runtime.GOARCH,
	}
	// As upstream (NodeSwap): the machine's swap when it has some.
	if c := m.cfg.Machine.Swap.Capacity; c != 0 {
		n.Status.NodeInfo.Swap = &v1.NodeSwapStatus{Capacity: &c}
	}
	n.Status.Images = m.images(ctx)
	// As upstream's RuntimeHandlers and NodeFeatures setters.
	if m.cfg.RuntimeHandlers != nil {
		n.Status.RuntimeHandlers = m.cfg.RuntimeHandlers(ctx)
	}
	if m.cfg.Features != nil {
		n.Status.Features = m.cfg.Features(ctx)
	}
	// As upstream's NodeDeclaredFeatures setter (GA, locked on).
	n.Status.DeclaredFeatures = m.cfg.DeclaredFeatures
	n.Status.VolumesInUse = nil
	if m.cfg.VolumesInUse != nil {
		inUse := m.cfg.VolumesInUse()
		slices.Sort(inUse)
		n.Status.VolumesInUse = inUse
	}

	readyStatus, readyReason, readyMsg := v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"
	errs := []error{m.runtimeReady(ctx)}
	if m.cfg.ShuttingDown != nil {
		errs = append(errs, m.cfg.ShuttingDown())
	}
	if err := utilerrors.NewAggregate(errs); err != nil {
		readyStatus, readyReason, readyMsg = v1.ConditionFalse, "KubeletNotReady", err.Error()
	}
	now := metav1.NewTime(m.cfg.Clock.Now())
	var pressure []v1.NodeConditionType
	if m.cfg.Pressure != nil {
		pressure = m.cfg.Pressure.Conditions()
	}
	conds := append(PressureConditions(pressure),
		v1.NodeCondition{Type: v1.NodeReady, Status: readyStatus, Reason: readyReason, Message: readyMsg})
	var merged []v1.NodeCondition
	for _, c := range conds {
		c.LastHeartbeatTime, c.LastTransitionTime = now, now
		for _, o := range n.Status.Conditions {
			if o.Type == c.Type {
				c.LastHeartbeatTime = o.LastHeartbeatTime
				if o.Status == c.Status {
					c.LastTransitionTime = o.LastTransitionTime
				}
			}
		}
		merged = append(merged, c)
	}
	// Conditions owned by others (node problem detector...) are kept.
	for _, o := range n.Status.Conditions {
		switch o.Type {
		case v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure, v1.NodeReady:
		default:
			merged = append(merged, o)
		}
	}
	n.Status.Conditions = merged
}

// runtimeReady is nil when the CRI runtime reports RuntimeReady and
// NetworkReady.
func (m *Manager) runtimeReady(ctx context.Context) error {
	resp, err := m.cfg.Runtime.Status(ctx, false)
	if err != nil {
		return fmt.Errorf("container runtime status check may not have completed yet: %v", err)
	}
	for _, want := range []string{runtimeapi.RuntimeReady, runtimeapi.NetworkReady} {
		ok := false
		for _, c := range resp.GetStatus().GetConditions() {
			if c.Type == want {
				ok = c.Status
				if !ok {
					return fmt.Errorf("container runtime %s is false: %s: %s", want, c.Reason, c.Message)
				}
			}
		}
		if !ok {
			return fmt.Errorf("container runtime did not report %s", want)
		}
	}
	return nil
}

// maxNamesPerImage is upstream's MaxNamesPerImageInNodeStatus.
const maxNamesPerImage = 5

// images lists the images on the node, largest first, up to
// nodeStatusMaxImages (50 by default, -1 no cap), each with at most 5
// names, as upstream.
func (m *Manager) images(ctx context.Context) []v1.ContainerImage {
	list, err := m.cfg.Images.ListImages(ctx, nil)
	if err != nil {
		return nil
	}
	return nodeImages(list, m.cfg.Kubelet.NodeStatusMaxImages)
}

func nodeImages(list []*runtimeapi.Image, maxImages *int32) []v1.ContainerImage {
	sort.SliceStable(list, func(i, j int) bool { return list[i].Size > list[j].Size })
	max := int32(50)
	if maxImages != nil {
		max = *maxImages
	}
	if max > -1 && int(max) < len(list) {
		list = list[:max]
	}
	var out []v1.ContainerImage
	for _, img := range list {
		names := append(append([]string(nil), img.RepoDigests...), img.RepoTags...)
		if len(names) > maxNamesPerImage {
			names = names[:maxNamesPerImage]
		}
		out = append(out, v1.ContainerImage{Names: names, SizeBytes: int64(img.Size)})
	}
	return out
}
