package volumes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// fakeCSI stands for a CSI plugin: it "mounts" by creating the directory.
type fakeCSI struct {
	mu       sync.Mutex
	setUps   []Volume
	tornDown []string
}

func (*fakeCSI) Name() string { return "kubernetes.io~csi" }
func (*fakeCSI) CanSupport(spec *v1.Volume) bool {
	return spec.CSI != nil && spec.CSI.Driver == "fake.csi.example.com"
}
func (f *fakeCSI) SetUp(_ context.Context, vol *Volume) (string, error) {
	f.mu.Lock()
	f.setUps = append(f.setUps, *vol)
	f.mu.Unlock()
	return vol.Dir, os.MkdirAll(vol.Dir, 0o750)
}
func (f *fakeCSI) TearDown(_ context.Context, dir string) error {
	f.mu.Lock()
	f.tornDown = append(f.tornDown, dir)
	f.mu.Unlock()
	return nil
}

func csiPod(driver string) *v1.Pod {
	p := &v1.Pod{}
	p.Name, p.Namespace, p.UID = "p", "ns", "uid-csi"
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: driver}}}}
	return p
}

func TestCSIPluginSeam(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, ManagerConfig{PodsDir: t.TempDir()})
	pod := csiPod("fake.csi.example.com")

	// No plugin for csi: refused, saying so.
	if _, err := m.Setup(ctx, pod); err == nil || !strings.Contains(err.Error(), "volume type csi is not supported by this node") {
		t.Fatalf("csi without a plugin: %v", err)
	}

	f := &fakeCSI{}
	m.Register("csi", f)
	paths, err := m.Setup(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(m.PodDir(pod.UID), "volumes", "kubernetes.io~csi", "data")
	if paths["data"] != want {
		t.Errorf("path %q, want %q", paths["data"], want)
	}
	if _, err := m.Setup(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if len(f.setUps) != 2 || !f.setUps[0].First || f.setUps[1].First || f.setUps[0].Spec.CSI.Driver != "fake.csi.example.com" {
		t.Errorf("set ups %+v: want two, the first one First", f.setUps)
	}
	// A driver the plugin does not support: a clear error.
	if _, err := m.Setup(ctx, csiPod("other.example.com")); err == nil || !strings.Contains(err.Error(), "driver other.example.com") {
		t.Errorf("unsupported driver: %v", err)
	}
	// Teardown goes through the plugin (found by its directory name), then
	// removes the pod's directory.
	if err := m.Teardown(pod.UID); err != nil {
		t.Fatal(err)
	}
	if len(f.tornDown) != 1 || f.tornDown[0] != want {
		t.Errorf("torn down %v, want [%s]", f.tornDown, want)
	}
	if _, err := os.Stat(m.PodDir(pod.UID)); !os.IsNotExist(err) {
		t.Errorf("pod directory left: %v", err)
	}
	// A pod set up again after its teardown is a first set up again.
	if _, err := m.Setup(ctx, pod); err != nil || !f.setUps[2].First {
		t.Errorf("set up after teardown: %v, first %v", err, f.setUps[2].First)
	}
}

func TestUnsupportedKinds(t *testing.T) {
	m := newManager(t, ManagerConfig{PodsDir: t.TempDir()})
	for kind, src := range map[string]v1.VolumeSource{
		"persistentVolumeClaim": {PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}},
		"nfs":                   {NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}},
		"csi":                   {CSI: &v1.CSIVolumeSource{Driver: "d"}},
		"ephemeral":             {Ephemeral: &v1.EphemeralVolumeSource{}},
	} {
		v := v1.Volume{Name: "v", VolumeSource: src}
		if got := Kind(&v); got != kind {
			t.Errorf("Kind = %q, want %q", got, kind)
		}
		pod := &v1.Pod{}
		pod.UID = "u"
		pod.Spec.Volumes = []v1.Volume{v}
		_, err := m.Setup(context.Background(), pod)
		if err == nil || !strings.Contains(err.Error(), "volume type "+kind+" is not supported by this node: no volume plugin for it") {
			t.Errorf("%s: %v", kind, err)
		}
	}
	if got := Kind(&v1.Volume{VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}); got != "emptyDir" {
		t.Errorf("Kind(emptyDir) = %q", got)
	}
	if got := Kind(&v1.Volume{}); got != "" {
		t.Errorf("Kind(no source) = %q", got)
	}
}
