package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nodelet/nodelet/internal/fsutil"
	"github.com/nodelet/nodelet/internal/rootdir"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/nodelet/nodelet/internal/apiclient"
	"google.golang.org/grpc"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/volumes"
)

// callTimeout bounds each CSI call of a volume's setup or teardown, as
// upstream's csiTimeout: a hung driver holds only its pod's sync.
const callTimeout = 2 * time.Minute

// republishPeriod is how often a volume of a requiresRepublish driver is
// published again (its tokens refreshed), as upstream's pod resync.
const republishPeriod = time.Minute

// VolumePluginConfig configures a VolumePlugin.
type VolumePluginConfig struct {
	// RootDir is the kubelet's root directory (staging and publish paths).
	RootDir string
	// NodeName is the node's name (attachment IDs, vol_data.json).
	NodeName string
	// Drivers are the registered CSI drivers.
	Drivers *Drivers
	// Client reads PVCs, PVs, CSIDrivers and VolumeAttachments and
	// requests service account tokens; nil in standalone mode, where only
	// persistent volumes of drivers... none can be resolved: every CSI
	// volume is refused with a clear error.
	Client apiclient.Interface
	// Secrets reads the stage and publish secrets (nil: Client's).
	Secrets func(ctx context.Context, namespace, name string) (*v1.Secret, error)
	// Timeout bounds each CSI call (callTimeout when zero).
	Timeout time.Duration
	// Clock times republishing (the real clock when nil).
	Clock clock.Clock
	// Recorder records the pods' expansion events; nil: none.
	Recorder record.EventRecorder
	// StatsPeriod is how long a NodeGetVolumeStats is reused
	// (volumeStatsAggPeriod; a minute when zero).
	StatsPeriod time.Duration
	// ExpansionPeriod is how often the PVCs of published volumes are
	// checked for a node expansion to finish (RunExpansion; 2 s when zero:
	// upstream's volume manager looks every 100 ms, a PVC read each 2 s is
	// enough for an operation that takes the controller seconds).
	ExpansionPeriod time.Duration
	// Objects reads the claims, volumes and CSIDrivers volumes are resolved
	// with (the offline checkpoint's read-through getter); Client directly
	// when nil.
	Objects Objects
}

// Objects reads the API objects CSI volumes are resolved with.
type Objects interface {
	PersistentVolumeClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error)
	PersistentVolume(ctx context.Context, name string) (*v1.PersistentVolume, error)
	CSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error)
}

// clientObjects reads Objects through a client.
type clientObjects struct{ c apiclient.Interface }

func (o clientObjects) PersistentVolumeClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error) {
	return o.c.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (o clientObjects) PersistentVolume(ctx context.Context, name string) (*v1.PersistentVolume, error) {
	return o.c.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

func (o clientObjects) CSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
	return o.c.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{})
}

// VolumePlugin is the volume plugin of CSI volumes (internal/volumes'
// Plugin): inline csi volumes, and PVCs (and generic ephemeral volumes)
// bound to a CSI PersistentVolume. It stages (when the driver has
// STAGE_UNSTAGE_VOLUME) and publishes at upstream's paths with
// vol_data.json beside them, so teardown works from the directory alone,
// after a restart too; a volume is unstaged when the last pod using it is
// torn down.
type VolumePlugin struct {
	cfg VolumePluginConfig

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn // by endpoint
	locks  map[string]*sync.Mutex      // by driver and handle
	staged map[string]bool             // driver/handle staged by this process
	set    map[setKey]*setUp
}

type setKey struct {
	uid  types.UID
	name string
}

// setUp is a volume this process published for a pod.
type setUp struct {
	pod       *v1.Pod
	spec      *VolumeSpec
	claimNS   string
	claim     string
	usage     *Usage // the last NodeGetVolumeStats
	target    string
	unique    v1.UniqueVolumeName // "" for inline volumes
	republish bool
	published time.Time
}

// NewVolumePlugin returns the plugin for cfg; RootDir, NodeName and Drivers
// are required.
func NewVolumePlugin(cfg VolumePluginConfig) (*VolumePlugin, error) {
	switch {
	case cfg.RootDir == "":
		return nil, errors.New("csi: VolumePluginConfig.RootDir is required")
	case cfg.NodeName == "":
		return nil, errors.New("csi: VolumePluginConfig.NodeName is required")
	case cfg.Drivers == nil:
		return nil, errors.New("csi: VolumePluginConfig.Drivers is required")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = callTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.ExpansionPeriod == 0 {
		cfg.ExpansionPeriod = 2 * time.Second
	}
	if cfg.StatsPeriod == 0 {
		cfg.StatsPeriod = time.Minute
	}
	if cfg.Objects == nil && cfg.Client != nil {
		cfg.Objects = clientObjects{cfg.Client}
	}
	if cfg.Secrets == nil && cfg.Client != nil {
		c := cfg.Client
		cfg.Secrets = func(ctx context.Context, ns, name string) (*v1.Secret, error) {
			return c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		}
	}
	return &VolumePlugin{cfg: cfg, conns: map[string]*grpc.ClientConn{}, locks: map[string]*sync.Mutex{},
		staged: map[string]bool{}, set: map[setKey]*setUp{}}, nil
}

// DirName is the directory of CSI volumes under a pod's volumes.
const DirName = "kubernetes.io~csi"

// Name implements volumes.Plugin.
func (*VolumePlugin) Name() string { return DirName }

// CanSupport implements volumes.Plugin: inline csi volumes, PVCs and
// generic ephemeral volumes (whose PV must be a CSI volume).
func (*VolumePlugin) CanSupport(spec *v1.Volume) bool {
	return spec.CSI != nil || spec.PersistentVolumeClaim != nil || spec.Ephemeral != nil
}

// InUse lists the persistent volumes published for pods, as the Node's
// volumesInUse reports them.
func (p *VolumePlugin) InUse() []v1.UniqueVolumeName {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[v1.UniqueVolumeName]bool{}
	var out []v1.UniqueVolumeName
	for _, s := range p.set {
		if s.unique != "" && !seen[s.unique] {
			seen[s.unique] = true
			out = append(out, s.unique)
		}
	}
	return out
}

// SetUp implements volumes.Plugin.
func (p *VolumePlugin) SetUp(ctx context.Context, vol *volumes.Volume) (string, error) {
	key := setKey{vol.Pod.UID, vol.Spec.Name}
	p.mu.Lock()
	s := p.set[key]
	p.mu.Unlock()
	if s != nil && !(s.republish && p.cfg.Clock.Since(s.published) >= republishPeriod) {
		return s.target, nil
	}
	spec, err := p.resolve(ctx, vol)
	if err != nil {
		return "", err
	}
	target, republish, err := p.publish(ctx, vol, spec, s != nil)
	if err != nil {
		return "", err
	}
	ns := &setUp{pod: vol.Pod, spec: spec, target: target, republish: republish, published: p.cfg.Clock.Now()}
	ns.claimNS, ns.claim = claimOf(vol.Pod, vol.Spec)
	if spec.Mode == storagev1.VolumeLifecyclePersistent {
		ns.unique = spec.UniqueName()
	}
	p.mu.Lock()
	p.set[key] = ns
	p.mu.Unlock()
	return target, nil
}

// resolve finds what the pod's volume is, through the API for a PVC.
func (p *VolumePlugin) resolve(ctx context.Context, vol *volumes.Volume) (*VolumeSpec, error) {
	if vol.Spec.CSI != nil {
		if p.cfg.Client == nil {
			return nil, errors.New("kubernetes.io/csi: inline CSI volumes need the API server (the CSIDriver object): not in standalone mode")
		}
		return InlineSpec(vol.Pod, vol.Spec), nil
	}
	claim := ClaimName(vol.Pod, vol.Spec)
	if p.cfg.Client == nil {
		return nil, fmt.Errorf("PVC %s: persistent volumes need the API server: not in standalone mode", claim)
	}
	pvc, err := p.cfg.Objects.PersistentVolumeClaim(ctx, vol.Pod.Namespace, claim)
	if err != nil {
		return nil, fmt.Errorf("error processing PVC %s/%s: %w", vol.Pod.Namespace, claim, err)
	}
	if err := CheckClaim(vol.Pod, vol.Spec, pvc); err != nil {
		return nil, err
	}
	pv, err := p.cfg.Objects.PersistentVolume(ctx, pvc.Spec.VolumeName)
	if err != nil {
		return nil, fmt.Errorf("error processing PVC %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		return nil, fmt.Errorf("error processing PVC %s/%s: PV %s is not bound to it", pvc.Namespace, pvc.Name, pv.Name)
	}
	spec := PersistentSpec(vol.Spec, pv)
	if spec == nil {
		return nil, fmt.Errorf("PV %s of PVC %s/%s: only CSI persistent volumes are supported by this node", pv.Name, pvc.Namespace, pvc.Name)
	}
	return spec, nil
}

// publish stages (once) and publishes the volume for the pod; it reports
// the target and whether the driver wants it republished.
func (p *VolumePlugin) publish(ctx context.Context, vol *volumes.Volume, spec *VolumeSpec, again bool) (string, bool, error) {
	logger := klog.FromContext(ctx)
	drv, ok := p.cfg.Drivers.Get(spec.Driver)
	if !ok {
		return "", false, fmt.Errorf("kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: %w", NotRegistered(spec.Driver))
	}
	obj, err := p.cfg.Objects.CSIDriver(ctx, spec.Driver)
	if apierrors.IsNotFound(err) {
		obj, err = nil, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("kubernetes.io/csi: CSIDriver %s: %w", spec.Driver, err)
	}
	policy, err := Policy(obj, spec.Driver, spec.Mode)
	if err != nil {
		return "", false, fmt.Errorf("kubernetes.io/csi: mounter.SetupAt failed to check volume lifecycle mode: %w", err)
	}
	unlock := p.lock(spec.Driver + "/" + spec.Handle)
	defer unlock()
	conn, err := p.conn(drv.Endpoint)
	if err != nil {
		return "", false, err
	}
	node := csipb.NewNodeClient(conn)
	caps, err := p.nodeCaps(ctx, node)
	if err != nil {
		return "", false, fmt.Errorf("kubernetes.io/csi: NodeGetCapabilities of %s: %w", spec.Driver, err)
	}
	target := PublishPath(p.cfg.RootDir, string(vol.Pod.UID), spec.SpecName)
	record := filepath.Dir(target)
	if spec.Block {
		target = BlockPublishPath(p.cfg.RootDir, spec.SpecName, string(vol.Pod.UID))
	}
	if !again {
		// Published already (nodelet restarted): not published twice.
		if mounted, _ := isMountPoint(target); mounted {
			logger.V(2).Info("CSI volume already published", "pod", klog.KObj(vol.Pod), "volume", vol.Spec.Name, "driver", spec.Driver, "target", target)
			return target, policy.RequiresRepublish, nil
		}
	}
	var publishContext map[string]string
	if spec.Mode == storagev1.VolumeLifecyclePersistent && policy.AttachRequired {
		if publishContext, err = p.attachment(ctx, spec); err != nil {
			return "", false, err
		}
	}
	mountGroup := ""
	if g := vol.FSGroup(); g != nil && caps[csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP] {
		mountGroup = strconv.FormatInt(*g, 10)
	}
	capability := Capability(spec, caps[csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER], mountGroup)
	staging := ""
	if spec.Mode == storagev1.VolumeLifecyclePersistent && caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		staging = StagingPath(p.cfg.RootDir, spec.Driver, spec.Handle)
		if spec.Block {
			staging = BlockStagingPath(p.cfg.RootDir, spec.SpecName)
		}
		if err := p.stage(ctx, node, spec, staging, capability, publishContext); err != nil {
			return "", false, err
		}
	}
	attrs := spec.Attributes
	if policy.PodInfo {
		attrs = Merge(attrs, PodInfo(vol.Pod, spec.Mode))
	}
	secrets, err := p.secrets(ctx, spec.PublishSecret)
	if err != nil {
		return "", false, err
	}
	if len(policy.TokenRequests) > 0 {
		tokens, err := p.tokens(ctx, vol.Pod, policy.TokenRequests)
		if err != nil {
			return "", false, fmt.Errorf("kubernetes.io/csi: mounter.SetUpAt failed to get service accoount token attributes: %w", err)
		}
		if policy.TokensInSecrets {
			secrets = Merge(secrets, map[string]string{KeyTokens: tokens})
		} else {
			attrs = Merge(attrs, map[string]string{KeyTokens: tokens})
		}
	}
	data := VolData{
		SpecVolID: spec.SpecName, VolumeHandle: spec.Handle, DriverName: spec.Driver, NodeName: p.cfg.NodeName,
		VolumeLifecycleMode: string(spec.Mode), AttachmentID: AttachmentID(spec.Handle, spec.Driver, p.cfg.NodeName),
	}
	if spec.Block {
		data.DevicePath = target
		if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
			return "", false, fmt.Errorf("kubernetes.io/csi: blockMapper.SetUpDevice failed to create dir %s: %w", filepath.Dir(target), err)
		}
	}
	if err := WriteVolData(record, data); err != nil {
		return "", false, fmt.Errorf("kubernetes.io/csi: mounter.SetUpAt failed to save volume info data: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	if _, err := node.NodePublishVolume(cctx, &csipb.NodePublishVolumeRequest{
		VolumeId: spec.Handle, PublishContext: publishContext, StagingTargetPath: staging, TargetPath: target,
		VolumeCapability: capability, Readonly: spec.ReadOnly, Secrets: secrets, VolumeContext: attrs,
	}); err != nil {
		return "", false, fmt.Errorf("kubernetes.io/csi: mounter.SetUpAt failed: rpc NodePublishVolume: %w", err)
	}
	if mountGroup == "" && KubeletAppliesFSGroup(spec, vol.FSGroup(), policy.FSGroupPolicy) {
		if err := volumes.SetVolumeOwnership(ctx, target, vol.FSGroup(), vol.FSGroupChangePolicy(), false); err != nil {
			return "", false, fmt.Errorf("applyFSGroup failed for vol %s: %w", spec.Handle, err)
		}
	}
	logger.Info("CSI volume published", "pod", klog.KObj(vol.Pod), "volume", vol.Spec.Name, "driver", spec.Driver,
		"handle", spec.Handle, "staging", staging, "target", target)
	return target, policy.RequiresRepublish, nil
}

// stage calls NodeStageVolume once per volume (not again when the staging
// path is mounted already: nodelet restarted), with vol_data.json beside it.
func (p *VolumePlugin) stage(ctx context.Context, node csipb.NodeClient, spec *VolumeSpec, staging string,
	capability *csipb.VolumeCapability, publishContext map[string]string) error {
	key := spec.Driver + "/" + spec.Handle
	p.mu.Lock()
	done := p.staged[key]
	p.mu.Unlock()
	if done {
		return nil
	}
	if mounted, _ := isMountPoint(staging); mounted {
		p.markStaged(key, true)
		return nil
	}
	if !spec.Block {
		if err := WriteVolData(filepath.Dir(staging), VolData{VolumeHandle: spec.Handle, DriverName: spec.Driver}); err != nil {
			return fmt.Errorf("kubernetes.io/csi: attacher.MountDevice failed to save volume info data: %w", err)
		}
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return fmt.Errorf("kubernetes.io/csi: attacher.MountDevice failed to create dir %s: %w", staging, err)
	}
	secrets, err := p.secrets(ctx, spec.StageSecret)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	if _, err := node.NodeStageVolume(cctx, &csipb.NodeStageVolumeRequest{
		VolumeId: spec.Handle, PublishContext: publishContext, StagingTargetPath: staging,
		VolumeCapability: capability, Secrets: secrets, VolumeContext: spec.Attributes,
	}); err != nil {
		return fmt.Errorf("kubernetes.io/csi: attacher.MountDevice failed: rpc NodeStageVolume: %w", err)
	}
	p.markStaged(key, true)
	klog.FromContext(ctx).Info("CSI volume staged", "driver", spec.Driver, "handle", spec.Handle, "staging", staging)
	return nil
}

func (p *VolumePlugin) markStaged(key string, staged bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if staged {
		p.staged[key] = true
	} else {
		delete(p.staged, key)
	}
}

// attachment is the publish context of an attached volume, or an error
// while its VolumeAttachment is missing or not attached.
func (p *VolumePlugin) attachment(ctx context.Context, spec *VolumeSpec) (map[string]string, error) {
	id := AttachmentID(spec.Handle, spec.Driver, p.cfg.NodeName)
	va, err := p.cfg.Client.StorageV1().VolumeAttachments().Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubernetes.io/csi: volume %s is not attached to the node yet: %w", spec.Handle, err)
	}
	if !va.Status.Attached {
		msg := ""
		if e := va.Status.AttachError; e != nil {
			msg = ": " + e.Message
		}
		return nil, fmt.Errorf("kubernetes.io/csi: volume %s is not attached to the node yet (VolumeAttachment %s)%s", spec.Handle, id, msg)
	}
	return va.Status.AttachmentMetadata, nil
}

func (p *VolumePlugin) secrets(ctx context.Context, ref *v1.SecretReference) (map[string]string, error) {
	if ref == nil {
		return nil, nil
	}
	if p.cfg.Secrets == nil {
		return nil, fmt.Errorf("secret %s/%s: no API server", ref.Namespace, ref.Name)
	}
	s, err := p.cfg.Secrets(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("fetching secret %s/%s failed: %w", ref.Namespace, ref.Name, err)
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

// tokens requests the driver's service account tokens for the pod.
func (p *VolumePlugin) tokens(ctx context.Context, pod *v1.Pod, reqs []storagev1.TokenRequest) (string, error) {
	out := map[string]authenticationv1.TokenRequestStatus{}
	for _, r := range reqs {
		audiences := []string{r.Audience}
		if r.Audience == "" {
			audiences = nil
		}
		tr, err := p.cfg.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: r.ExpirationSeconds,
				BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
		}, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		out[r.Audience] = tr.Status
	}
	return TokensAttr(out)
}

// nodeCaps are the driver's node capabilities.
func (p *VolumePlugin) nodeCaps(ctx context.Context, node csipb.NodeClient) (map[csipb.NodeServiceCapability_RPC_Type]bool, error) {
	cctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	resp, err := node.NodeGetCapabilities(cctx, &csipb.NodeGetCapabilitiesRequest{})
	if err != nil {
		return nil, err
	}
	caps := map[csipb.NodeServiceCapability_RPC_Type]bool{}
	for _, c := range resp.GetCapabilities() {
		caps[c.GetRpc().GetType()] = true
	}
	return caps, nil
}

// TearDown implements volumes.Plugin: unpublish the pod's volume at dir
// (from its vol_data.json), then unstage it if no other pod uses it.
func (p *VolumePlugin) TearDown(ctx context.Context, dir string) error {
	data, err := ReadVolData(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil // never published: nothing of the driver's to undo
	}
	if err != nil {
		return err
	}
	drv, ok := p.cfg.Drivers.Get(data.DriverName)
	if !ok {
		return fmt.Errorf("kubernetes.io/csi: Unmounter.TearDownAt failed to get CSI client: %w", NotRegistered(data.DriverName))
	}
	unlock := p.lock(data.DriverName + "/" + data.VolumeHandle)
	defer unlock()
	conn, err := p.conn(drv.Endpoint)
	if err != nil {
		return err
	}
	node := csipb.NewNodeClient(conn)
	target := filepath.Join(dir, "mount")
	if data.DevicePath != "" {
		target = data.DevicePath
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	if _, err := node.NodeUnpublishVolume(cctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: data.VolumeHandle, TargetPath: target}); err != nil {
		return fmt.Errorf("kubernetes.io/csi: Unmounter.TearDownAt failed: rpc NodeUnpublishVolume: %w", err)
	}
	if mounted, _ := isMountPoint(target); mounted {
		return fmt.Errorf("kubernetes.io/csi: %s is still mounted after NodeUnpublishVolume", target)
	}
	// The driver removes the target; a driver that does not is helped.
	_ = os.Remove(target)
	if err := os.Remove(filepath.Join(dir, VolDataFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	_ = os.Remove(dir)
	p.forget(target)
	logger := klog.FromContext(ctx)
	logger.Info("CSI volume unpublished", "driver", data.DriverName, "handle", data.VolumeHandle, "target", target)
	if data.VolumeLifecycleMode == string(storagev1.VolumeLifecycleEphemeral) {
		return nil
	}
	staging, stagingDir := StagingPath(p.cfg.RootDir, data.DriverName, data.VolumeHandle), ""
	stagingDir = filepath.Dir(staging)
	if data.DevicePath != "" {
		_ = os.Remove(filepath.Dir(data.DevicePath)) // publish/<pv>, when empty
		staging = BlockStagingPath(p.cfg.RootDir, data.SpecVolID)
		stagingDir = staging
	}
	if _, err := os.Stat(stagingDir); err != nil {
		return nil // not staged
	}
	if p.usedElsewhere(data.DriverName, data.VolumeHandle) {
		return nil
	}
	cctx2, cancel2 := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel2()
	if _, err := node.NodeUnstageVolume(cctx2, &csipb.NodeUnstageVolumeRequest{VolumeId: data.VolumeHandle, StagingTargetPath: staging}); err != nil {
		return fmt.Errorf("kubernetes.io/csi: attacher.UnmountDevice failed: rpc NodeUnstageVolume: %w", err)
	}
	if mounted, _ := isMountPoint(staging); mounted {
		return fmt.Errorf("kubernetes.io/csi: %s is still mounted after NodeUnstageVolume", staging)
	}
	_ = os.Remove(staging)
	if data.DevicePath == "" {
		_ = os.Remove(filepath.Join(stagingDir, VolDataFile))
		_ = os.Remove(stagingDir)
	}
	p.markStaged(data.DriverName+"/"+data.VolumeHandle, false)
	logger.Info("CSI volume unstaged", "driver", data.DriverName, "handle", data.VolumeHandle, "staging", staging)
	return nil
}

// usedElsewhere reports whether a pod still has the volume published (a
// vol_data.json naming it under some pod's directory).
func (p *VolumePlugin) usedElsewhere(driver, handle string) bool {
	matches, _ := filepath.Glob(filepath.Join(rootdir.Dir(p.cfg.RootDir).PodVolumes("*"), DirName, "*", VolDataFile))
	for _, m := range matches {
		if d, err := ReadVolData(filepath.Dir(m)); err == nil && d.DriverName == driver && d.VolumeHandle == handle {
			return true
		}
	}
	return false
}

func (p *VolumePlugin) forget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, s := range p.set {
		if s.target == target {
			delete(p.set, k)
		}
	}
}

// lock serializes the setup and teardown of one volume across pods.
func (p *VolumePlugin) lock(key string) func() {
	p.mu.Lock()
	l := p.locks[key]
	if l == nil {
		l = &sync.Mutex{}
		p.locks[key] = l
	}
	p.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// conn is the (lazily dialled, shared) connection to a driver's endpoint.
func (p *VolumePlugin) conn(endpoint string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[endpoint]; c != nil {
		return c, nil
	}
	c, err := dial(endpoint)
	if err != nil {
		return nil, err
	}
	p.conns[endpoint] = c
	return c, nil
}

// isMountPoint reports whether something is mounted on path (read only at
// a volume's first setup and teardown, never on every sync).
func isMountPoint(path string) (bool, error) { return fsutil.IsMounted(path) }
