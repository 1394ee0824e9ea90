package podspec

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestUnsupportedVolumeDevices(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		Volumes: []v1.Volume{
			{Name: "claim", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
			{Name: "eph", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}},
			{Name: "dir", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		},
		Containers: []v1.Container{{Name: "c", VolumeDevices: []v1.VolumeDevice{
			{Name: "claim", DevicePath: "/dev/a"}, {Name: "eph", DevicePath: "/dev/b"},
			{Name: "dir", DevicePath: "/dev/c"}, {Name: "missing", DevicePath: "/dev/d"}}}},
	}}
	got := strings.Join(Unsupported(pod), "; ")
	want := "spec.containers[0].volumeDevices[2] (dir is not a persistentVolumeClaim or ephemeral volume); " +
		"spec.containers[0].volumeDevices[3] (missing is not a persistentVolumeClaim or ephemeral volume)"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
