package csi

import (
	"errors"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPolicy(t *testing.T) {
	file := storagev1.FileFSGroupPolicy
	for _, tc := range []struct {
		name    string
		obj     *storagev1.CSIDriver
		mode    storagev1.VolumeLifecycleMode
		want    DriverPolicy
		wantErr string
	}{
		{name: "no CSIDriver, persistent: attach, RWO-with-fsType policy", mode: storagev1.VolumeLifecyclePersistent,
			want: DriverPolicy{AttachRequired: true, FSGroupPolicy: storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy}},
		{name: "no CSIDriver, ephemeral: refused", mode: storagev1.VolumeLifecycleEphemeral, wantErr: "no CSIDriver object"},
		{name: "ephemeral not listed", mode: storagev1.VolumeLifecycleEphemeral, obj: &storagev1.CSIDriver{},
			wantErr: `only supports ["Persistent"]`},
		{name: "all fields", mode: storagev1.VolumeLifecycleEphemeral, obj: &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{
			AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true), FSGroupPolicy: &file, RequiresRepublish: ptr.To(true),
			ServiceAccountTokenInSecrets: ptr.To(true), TokenRequests: []storagev1.TokenRequest{{Audience: "a"}},
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}}},
			want: DriverPolicy{PodInfo: true, FSGroupPolicy: file, RequiresRepublish: true, TokensInSecrets: true,
				TokenRequests: []storagev1.TokenRequest{{Audience: "a"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Policy(tc.obj, "d", tc.mode)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.AttachRequired != tc.want.AttachRequired || got.PodInfo != tc.want.PodInfo || got.FSGroupPolicy != tc.want.FSGroupPolicy ||
				got.RequiresRepublish != tc.want.RequiresRepublish || got.TokensInSecrets != tc.want.TokensInSecrets ||
				len(got.TokenRequests) != len(tc.want.TokenRequests) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestKubeletAppliesFSGroup(t *testing.T) {
	rwo := []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	rwx := []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}
	gid := ptr.To[int64](1234)
	pers := storagev1.VolumeLifecyclePersistent
	for _, tc := range []struct {
		name   string
		spec   VolumeSpec
		group  *int64
		policy storagev1.FSGroupPolicy
		want   bool
	}{
		{"no fsGroup", VolumeSpec{FSType: "ext4", AccessModes: rwo, Mode: pers}, nil, storagev1.FileFSGroupPolicy, false},
		{"policy None", VolumeSpec{FSType: "ext4", AccessModes: rwo, Mode: pers}, gid, storagev1.NoneFSGroupPolicy, false},
		{"read-only", VolumeSpec{FSType: "ext4", AccessModes: rwo, Mode: pers, ReadOnly: true}, gid, storagev1.FileFSGroupPolicy, false},
		{"policy File, no fsType, RWX", VolumeSpec{AccessModes: rwx, Mode: pers}, gid, storagev1.FileFSGroupPolicy, true},
		{"default policy without fsType", VolumeSpec{AccessModes: rwo, Mode: pers}, gid, storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy, false},
		{"default policy, fsType, RWO", VolumeSpec{FSType: "ext4", AccessModes: rwo, Mode: pers}, gid, storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy, true},
		{"default policy, fsType, RWX", VolumeSpec{FSType: "ext4", AccessModes: rwx, Mode: pers}, gid, storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy, false},
		{"default policy, inline with fsType", VolumeSpec{FSType: "ext4", Mode: storagev1.VolumeLifecycleEphemeral}, gid, storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy, true},
	} {
		if got := KubeletAppliesFSGroup(&tc.spec, tc.group, tc.policy); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAccessMode(t *testing.T) {
	for _, tc := range []struct {
		modes []v1.PersistentVolumeAccessMode
		snmw  bool
		want  csipb.VolumeCapability_AccessMode_Mode
	}{
		{nil, false, csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, true, csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadOnlyMany}, false, csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteMany}, false, csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}, false, csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}, true, csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER},
	} {
		if got := AccessMode(tc.modes, tc.snmw); got != tc.want {
			t.Errorf("%v (single-node multi-writer %v): %v, want %v", tc.modes, tc.snmw, got, tc.want)
		}
	}
}

func TestClaims(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns", UID: "u1"}}
	eph := &v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}
	pvcVol := &v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-web-0", ReadOnly: true}}}
	if got := ClaimName(pod, eph); got != "web-0-scratch" {
		t.Errorf("ephemeral claim %q", got)
	}
	if got := ClaimName(pod, pvcVol); got != "data-web-0" {
		t.Errorf("claim %q", got)
	}
	bound := v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv1"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}
	pending := *bound.DeepCopy()
	pending.Status.Phase = v1.ClaimPending
	owned := *bound.DeepCopy()
	owned.OwnerReferences = []metav1.OwnerReference{{UID: "u1", Controller: ptr.To(true)}}
	for _, tc := range []struct {
		name    string
		vol     *v1.Volume
		pvc     v1.PersistentVolumeClaim
		wantErr string
	}{
		{"bound", pvcVol, bound, ""},
		{"pending", pvcVol, pending, "PVC is not bound"},
		{"ephemeral, not the pod's", eph, bound, "pod is not owner"},
		{"ephemeral, the pod's", eph, owned, ""},
	} {
		err := CheckClaim(pod, tc.vol, &tc.pvc)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
		}
	}

	block := v1.PersistentVolumeBlock
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: v1.PersistentVolumeSpec{
		VolumeMode: &block, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, MountOptions: []string{"noatime"},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h", FSType: "xfs"}}}}
	s := PersistentSpec(pvcVol, pv)
	if s.Driver != "d" || s.Handle != "h" || s.SpecName != "pv1" || !s.Block || !s.ReadOnly || s.FSType != "xfs" ||
		s.Mode != storagev1.VolumeLifecyclePersistent || s.UniqueName() != "kubernetes.io/csi/d^h" {
		t.Errorf("persistent spec %+v", s)
	}
	if PersistentSpec(pvcVol, &v1.PersistentVolume{}) != nil {
		t.Error("a PV without a csi source resolved")
	}
	in := InlineSpec(pod, &v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d",
		NodePublishSecretRef: &v1.LocalObjectReference{Name: "s"}}}})
	if in.Handle != InlineHandle("u1", "v") || !strings.HasPrefix(in.Handle, "csi-") || len(in.Handle) != 68 ||
		in.PublishSecret.Namespace != "ns" || in.Mode != storagev1.VolumeLifecycleEphemeral || in.SpecName != "v" {
		t.Errorf("inline spec %+v", in)
	}
}

func TestCapability(t *testing.T) {
	c := Capability(&VolumeSpec{FSType: "ext4", MountOptions: []string{"ro"}}, false, "1234")
	if m := c.GetMount(); m == nil || m.FsType != "ext4" || m.VolumeMountGroup != "1234" || m.MountFlags[0] != "ro" {
		t.Errorf("mount capability %v", c)
	}
	if c := Capability(&VolumeSpec{Block: true}, false, ""); c.GetBlock() == nil {
		t.Errorf("block capability %v", c)
	}
}

func TestUsageOf(t *testing.T) {
	u := UsageOf(&csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
		{Unit: csipb.VolumeUsage_BYTES, Total: 100, Available: 60, Used: 40},
		{Unit: csipb.VolumeUsage_INODES, Total: 10, Available: 7, Used: 3},
	}}, "ns", "data")
	vs := u.SummaryStats("vol")
	if vs.Name != "vol" || vs.PVCRef == nil || vs.PVCRef.Name != "data" || vs.PVCRef.Namespace != "ns" ||
		*vs.CapacityBytes != 100 || *vs.AvailableBytes != 60 || *vs.UsedBytes != 40 ||
		*vs.Inodes != 10 || *vs.InodesFree != 7 || *vs.InodesUsed != 3 {
		t.Errorf("summary stats %+v", vs)
	}
	// A block volume: its size only; no claim: no PVC reference.
	u = UsageOf(&csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{{Unit: csipb.VolumeUsage_BYTES, Total: 5}}}, "", "")
	if vs := u.SummaryStats("b"); vs.PVCRef != nil || *vs.CapacityBytes != 5 || *vs.UsedBytes != 0 || vs.Inodes != nil {
		t.Errorf("block stats %+v", vs)
	}
}

func TestNodeExpansion(t *testing.T) {
	gi := func(s string) v1.ResourceList { return v1.ResourceList{v1.ResourceStorage: resource.MustParse(s)} }
	pv := &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{Capacity: gi("2Gi")}}
	for _, tc := range []struct {
		name   string
		have   string
		status v1.ClaimResourceStatus
		want   bool
	}{
		{"grown, node step pending", "1Gi", v1.PersistentVolumeClaimNodeResizePending, true},
		{"grown, node attempt to finish", "1Gi", v1.PersistentVolumeClaimNodeResizeInProgress, true},
		{"controller still at work", "1Gi", v1.PersistentVolumeClaimControllerResizeInProgress, false},
		{"infeasible", "1Gi", v1.PersistentVolumeClaimNodeResizeInfeasible, false},
		{"already as large", "2Gi", v1.PersistentVolumeClaimNodeResizePending, false},
	} {
		pvc := &v1.PersistentVolumeClaim{Status: v1.PersistentVolumeClaimStatus{Capacity: gi(tc.have),
			AllocatedResourceStatuses: map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: tc.status}}}
		size, got := NodeExpansionNeeded(pvc, pv)
		if got != tc.want || size.String() != "2Gi" {
			t.Errorf("%s: %v %s, want %v", tc.name, got, size.String(), tc.want)
		}
	}
	pvc := &v1.PersistentVolumeClaim{Status: v1.PersistentVolumeClaimStatus{Capacity: gi("1Gi"),
		AllocatedResourceStatuses: map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: v1.PersistentVolumeClaimNodeResizeInProgress},
		Conditions:                []v1.PersistentVolumeClaimCondition{{Type: v1.PersistentVolumeClaimFileSystemResizePending}, {Type: "Other"}}}}
	failed := ExpansionFailed(pvc, errors.New("boom"), time.Unix(0, 0))
	if last := failed.Status.Conditions[len(failed.Status.Conditions)-1]; last.Type != v1.PersistentVolumeClaimNodeResizeError ||
		last.Message != "failed to expand pvc with boom" || failed.Status.AllocatedResourceStatuses[v1.ResourceStorage] != v1.PersistentVolumeClaimNodeResizeInProgress {
		t.Errorf("failed status %+v", failed.Status)
	}
	done := ExpansionFinished(failed, resource.MustParse("2Gi"))
	if c := done.Status.Capacity[v1.ResourceStorage]; c.String() != "2Gi" || done.Status.AllocatedResourceStatuses != nil ||
		len(done.Status.Conditions) != 1 || done.Status.Conditions[0].Type != "Other" {
		t.Errorf("finished status %+v", done.Status)
	}
}
