package csi

import (
	"testing"
)

func TestPaths(t *testing.T) {
	// sha256 computed apart (python's hashlib): what upstream's
	// makeDeviceMountPath and getAttachmentName give.
	if got, want := StagingPath("/var/lib/kubelet", "hostpath.csi.k8s.io", "vol-1"),
		"/var/lib/kubelet/plugins/kubernetes.io/csi/hostpath.csi.k8s.io/d2e8363faaac7ae76def3b14091d8eb5755f6b92e9531627aeec833a8731cc49/globalmount"; got != want {
		t.Errorf("staging path %s, want %s", got, want)
	}
	if got := PublishPath("/var/lib/kubelet", "uid-1", "pvc-123"); got != "/var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~csi/pvc-123/mount" {
		t.Errorf("publish path %s", got)
	}
	if got := AttachmentID("vol-1", "d", "n"); got != "csi-dd56c8ae9f1f8dd1a80cfb1f18c6c38b35f6a9cac3bebd1325ddc6868faaf9cf" {
		t.Errorf("attachment ID %s", got)
	}
	dir := t.TempDir()
	want := VolData{SpecVolID: "pvc-123", VolumeHandle: "vol-1", DriverName: "d", NodeName: "n", VolumeLifecycleMode: "Persistent", AttachmentID: AttachmentID("vol-1", "d", "n")}
	if err := WriteVolData(dir, want); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadVolData(dir); err != nil || got != want {
		t.Errorf("read %+v %v", got, err)
	}
}
