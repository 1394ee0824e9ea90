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

// TestUnsupportedResourceClaims: as upstream, a static pod (file or URL)
// may not use ResourceClaims; an API pod's are the DRA manager's.
func TestUnsupportedResourceClaims(t *testing.T) {
	mk := func() *v1.Pod {
		name := "gpu"
		return &v1.Pod{
			ObjectMeta: metaName("p"),
			Spec: v1.PodSpec{
				ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &name}},
				Containers:     []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}}},
			},
		}
	}
	for source, want := range map[string]string{
		FileSource:      "spec.resourceClaims (static pods may not use ResourceClaims); spec.containers[0].resources.claims (static pods may not use ResourceClaims)",
		HTTPSource:      "spec.resourceClaims (static pods may not use ResourceClaims); spec.containers[0].resources.claims (static pods may not use ResourceClaims)",
		APIServerSource: "",
	} {
		p := mk()
		p.Annotations = map[string]string{ConfigSourceAnnotationKey: source}
		if got := strings.Join(Unsupported(p), "; "); got != want {
			t.Errorf("%s pod: %q, want %q", source, got, want)
		}
	}
}
