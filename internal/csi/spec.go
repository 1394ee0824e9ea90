package csi

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Volume context keys the kubelet adds (podInfoOnMount, tokenRequests), as
// upstream.
const (
	KeyPodName        = "csi.storage.k8s.io/pod.name"
	KeyPodNamespace   = "csi.storage.k8s.io/pod.namespace"
	KeyPodUID         = "csi.storage.k8s.io/pod.uid"
	KeyServiceAccount = "csi.storage.k8s.io/serviceAccount.name"
	KeyEphemeral      = "csi.storage.k8s.io/ephemeral"
	KeyTokens         = "csi.storage.k8s.io/serviceAccount.tokens"
)

// VolumeSpec is what a pod's CSI volume is, resolved from the pod (an
// inline csi volume) or from its PersistentVolume (a PVC, or the PVC of a
// generic ephemeral volume).
type VolumeSpec struct {
	Driver string
	Handle string
	// SpecName names the publish directory: the PV's name, or the pod's
	// volume name for an inline volume.
	SpecName string
	Mode     storagev1.VolumeLifecycleMode
	ReadOnly bool
	FSType   string
	// Block: the PV's volumeMode is Block.
	Block        bool
	Attributes   map[string]string
	AccessModes  []v1.PersistentVolumeAccessMode
	MountOptions []string
	// StageSecret and PublishSecret name the secrets of NodeStageVolume
	// and NodePublishVolume, nil when none.
	StageSecret, PublishSecret *v1.SecretReference
	// PV is the PersistentVolume's name, "" for an inline volume.
	PV string
}

// UniqueName is the volume's name in the Node's volumesInUse, as upstream:
// kubernetes.io/csi/<driver>^<handle>.
func (s *VolumeSpec) UniqueName() v1.UniqueVolumeName {
	return v1.UniqueVolumeName(PluginName + "/" + s.Driver + "^" + s.Handle)
}

// InlineHandle is an inline volume's handle, as upstream's
// makeVolumeHandle: csi-<sha256(podUID+volume name)>.
func InlineHandle(podUID, volName string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(podUID+volName)))
}

// InlineSpec resolves an inline csi volume of pod.
func InlineSpec(pod *v1.Pod, vol *v1.Volume) *VolumeSpec {
	src := vol.CSI
	s := &VolumeSpec{
		Driver: src.Driver, Handle: InlineHandle(string(pod.UID), vol.Name), SpecName: vol.Name,
		Mode: storagev1.VolumeLifecycleEphemeral, ReadOnly: src.ReadOnly != nil && *src.ReadOnly,
		Attributes: src.VolumeAttributes, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
	}
	if src.FSType != nil {
		s.FSType = *src.FSType
	}
	if src.NodePublishSecretRef != nil {
		s.PublishSecret = &v1.SecretReference{Name: src.NodePublishSecretRef.Name, Namespace: pod.Namespace}
	}
	return s
}

// ClaimName is the PVC a pod's volume uses: its persistentVolumeClaim's, or
// <pod>-<volume> for a generic ephemeral volume; "" for other volumes.
func ClaimName(pod *v1.Pod, vol *v1.Volume) string {
	switch {
	case vol.PersistentVolumeClaim != nil:
		return vol.PersistentVolumeClaim.ClaimName
	case vol.Ephemeral != nil:
		return pod.Name + "-" + vol.Name
	}
	return ""
}

// CheckClaim checks that a PVC may serve the pod's volume: bound, and for
// a generic ephemeral volume created for this pod, with upstream's
// messages.
func CheckClaim(pod *v1.Pod, vol *v1.Volume, pvc *v1.PersistentVolumeClaim) error {
	if vol.Ephemeral != nil {
		owned := false
		for _, ref := range pvc.OwnerReferences {
			if ref.Controller != nil && *ref.Controller && ref.UID == pod.UID {
				owned = true
			}
		}
		if !owned {
			return fmt.Errorf("PVC %s/%s was not created for pod %s/%s (pod is not owner)", pvc.Namespace, pvc.Name, pod.Namespace, pod.Name)
		}
	}
	if pvc.DeletionTimestamp != nil {
		return fmt.Errorf("error processing PVC %s/%s: PVC is being deleted", pvc.Namespace, pvc.Name)
	}
	if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
		return fmt.Errorf("error processing PVC %s/%s: PVC is not bound", pvc.Namespace, pvc.Name)
	}
	return nil
}

// PersistentSpec resolves a PVC's bound PV; nil when the PV is not a CSI
// volume.
func PersistentSpec(vol *v1.Volume, pv *v1.PersistentVolume) *VolumeSpec {
	src := pv.Spec.CSI
	if src == nil {
		return nil
	}
	s := &VolumeSpec{
		Driver: src.Driver, Handle: src.VolumeHandle, SpecName: pv.Name, PV: pv.Name,
		Mode: storagev1.VolumeLifecyclePersistent, ReadOnly: src.ReadOnly, FSType: src.FSType,
		Attributes: src.VolumeAttributes, AccessModes: pv.Spec.AccessModes, MountOptions: pv.Spec.MountOptions,
		StageSecret: src.NodeStageSecretRef, PublishSecret: src.NodePublishSecretRef,
		Block: pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock,
	}
	if vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.ReadOnly {
		s.ReadOnly = true
	}
	return s
}

// DriverPolicy is what the CSIDriver object (nil when there is none)
// decides for a volume, with upstream's defaults.
type DriverPolicy struct {
	AttachRequired bool
	PodInfo        bool
	FSGroupPolicy  storagev1.FSGroupPolicy
	TokenRequests  []storagev1.TokenRequest
	// TokensInSecrets: tokens go in the secrets, not the volume context.
	TokensInSecrets   bool
	RequiresRepublish bool
}

// Policy reads a CSIDriver (nil: none) for a volume of mode, failing when
// the driver does not support the mode (only persistent volumes without a
// CSIDriver), as upstream's supportsVolumeLifecycleMode.
func Policy(d *storagev1.CSIDriver, driver string, mode storagev1.VolumeLifecycleMode) (DriverPolicy, error) {
	p := DriverPolicy{AttachRequired: true, FSGroupPolicy: storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy}
	if d == nil {
		if mode != storagev1.VolumeLifecyclePersistent {
			return p, fmt.Errorf("volume mode %q not supported by driver %s (no CSIDriver object)", mode, driver)
		}
		return p, nil
	}
	modes := d.Spec.VolumeLifecycleModes
	if len(modes) == 0 {
		modes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
	supported := false
	for _, m := range modes {
		supported = supported || m == mode
	}
	if !supported {
		return p, fmt.Errorf("volume mode %q not supported by driver %s (only supports %q)", mode, driver, modes)
	}
	if d.Spec.AttachRequired != nil {
		p.AttachRequired = *d.Spec.AttachRequired
	}
	p.PodInfo = d.Spec.PodInfoOnMount != nil && *d.Spec.PodInfoOnMount
	if d.Spec.FSGroupPolicy != nil && *d.Spec.FSGroupPolicy != "" {
		p.FSGroupPolicy = *d.Spec.FSGroupPolicy
	}
	p.TokenRequests = d.Spec.TokenRequests
	p.TokensInSecrets = d.Spec.ServiceAccountTokenInSecrets != nil && *d.Spec.ServiceAccountTokenInSecrets
	p.RequiresRepublish = d.Spec.RequiresRepublish != nil && *d.Spec.RequiresRepublish
	return p, nil
}

// PodInfo is the volume context podInfoOnMount adds.
func PodInfo(pod *v1.Pod, mode storagev1.VolumeLifecycleMode) map[string]string {
	return map[string]string{
		KeyPodName: pod.Name, KeyPodNamespace: pod.Namespace, KeyPodUID: string(pod.UID),
		KeyServiceAccount: pod.Spec.ServiceAccountName,
		KeyEphemeral:      strconv.FormatBool(mode == storagev1.VolumeLifecycleEphemeral),
	}
}

// TokensAttr is the serviceAccount.tokens value: each audience's token
// status as JSON, as upstream.
func TokensAttr(tokens map[string]authenticationv1.TokenRequestStatus) (string, error) {
	b, err := json.Marshal(tokens)
	return string(b), err
}

// Merge is a copy of a with b's entries added.
func Merge(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// AccessMode maps a PV access mode to CSI's, as upstream's
// asCSIAccessModeV1 (ReadWriteOncePod to SINGLE_NODE_SINGLE_WRITER when
// the driver offers SINGLE_NODE_MULTI_WRITER).
func AccessMode(modes []v1.PersistentVolumeAccessMode, singleNodeMultiWriter bool) csipb.VolumeCapability_AccessMode_Mode {
	am := v1.ReadWriteOnce
	if len(modes) > 0 {
		am = modes[0]
	}
	switch am {
	case v1.ReadWriteOnce:
		if singleNodeMultiWriter {
			return csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
		}
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	case v1.ReadOnlyMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case v1.ReadWriteMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	case v1.ReadWriteOncePod:
		if singleNodeMultiWriter {
			return csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		}
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	}
	return csipb.VolumeCapability_AccessMode_UNKNOWN
}

// Capability is the volume capability of NodeStageVolume and
// NodePublishVolume; mountGroup is the pod's fsGroup when the driver
// applies it (VOLUME_MOUNT_GROUP), "" otherwise.
func Capability(s *VolumeSpec, singleNodeMultiWriter bool, mountGroup string) *csipb.VolumeCapability {
	c := &csipb.VolumeCapability{AccessMode: &csipb.VolumeCapability_AccessMode{Mode: AccessMode(s.AccessModes, singleNodeMultiWriter)}}
	if s.Block {
		c.AccessType = &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{
			FsType: s.FSType, MountFlags: s.MountOptions, VolumeMountGroup: mountGroup}}
	}
	return c
}

// KubeletAppliesFSGroup reports whether nodelet changes the volume's
// ownership to the pod's fsGroup itself, as upstream's supportsFSGroup
// (the driver does when it has VOLUME_MOUNT_GROUP).
func KubeletAppliesFSGroup(s *VolumeSpec, fsGroup *int64, policy storagev1.FSGroupPolicy) bool {
	if fsGroup == nil || policy == storagev1.NoneFSGroupPolicy || s.ReadOnly {
		return false
	}
	if policy == storagev1.FileFSGroupPolicy {
		return true
	}
	if s.FSType == "" {
		return false
	}
	if s.Mode == storagev1.VolumeLifecycleEphemeral {
		return true
	}
	for _, m := range s.AccessModes {
		if m == v1.ReadWriteOnce {
			return true
		}
	}
	return false
}
