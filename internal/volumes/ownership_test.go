package volumes

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("changing groups needs root")
	}
}

func groupAndMode(t *testing.T, p string) (int, os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Gid), fi.Mode() & (os.ModePerm | os.ModeSetgid | os.ModeSticky)
}

func TestSetVolumeOwnership(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o700))
	must(t, os.WriteFile(filepath.Join(dir, "sub", "f"), []byte("x"), 0o600))
	must(t, os.Symlink("sub/f", filepath.Join(dir, "link")))
	must(t, os.Chmod(dir, 0o755))

	must(t, SetVolumeOwnership(context.Background(), dir, ptr.To[int64](2345), nil, false))
	for p, want := range map[string]os.FileMode{
		dir:                            0o775 | os.ModeSetgid,
		filepath.Join(dir, "sub"):      0o770 | os.ModeSetgid,
		filepath.Join(dir, "sub", "f"): 0o660,
	} {
		if gid, mode := groupAndMode(t, p); gid != 2345 || mode != want {
			t.Errorf("%s: gid %d mode %v, want 2345 %v", p, gid, mode, want)
		}
	}
	if gid, _ := groupAndMode(t, filepath.Join(dir, "link")); gid != 2345 {
		t.Errorf("symlink gid %d", gid)
	}
	// Read-only volumes get group read only.
	ro := t.TempDir()
	must(t, os.WriteFile(filepath.Join(ro, "f"), []byte("x"), 0o400))
	must(t, SetVolumeOwnership(context.Background(), ro, ptr.To[int64](2345), nil, true))
	if gid, mode := groupAndMode(t, filepath.Join(ro, "f")); gid != 2345 || mode != 0o440 {
		t.Errorf("read-only file: gid %d mode %v, want 2345 0440", gid, mode)
	}

	// OnRootMismatch: a right root means no walk.
	must(t, os.Lchown(filepath.Join(dir, "sub", "f"), -1, 3000))
	onRoot := ptr.To(v1.FSGroupChangeOnRootMismatch)
	must(t, SetVolumeOwnership(context.Background(), dir, ptr.To[int64](2345), onRoot, false))
	if gid, _ := groupAndMode(t, filepath.Join(dir, "sub", "f")); gid != 3000 {
		t.Errorf("OnRootMismatch walked a volume whose root was right (gid %d)", gid)
	}
	// A root without setgid is a mismatch: walked.
	must(t, os.Chmod(dir, 0o775))
	must(t, SetVolumeOwnership(context.Background(), dir, ptr.To[int64](2345), onRoot, false))
	if gid, _ := groupAndMode(t, filepath.Join(dir, "sub", "f")); gid != 2345 {
		t.Errorf("OnRootMismatch did not walk a mismatched root (gid %d)", gid)
	}
	// Always walks.
	must(t, os.Lchown(filepath.Join(dir, "sub", "f"), -1, 3000))
	must(t, SetVolumeOwnership(context.Background(), dir, ptr.To[int64](2345), ptr.To(v1.FSGroupChangeAlways), false))
	if gid, _ := groupAndMode(t, filepath.Join(dir, "sub", "f")); gid != 2345 {
		t.Errorf("Always did not walk (gid %d)", gid)
	}
	// No fsGroup: nothing.
	must(t, os.Lchown(filepath.Join(dir, "sub", "f"), -1, 3000))
	must(t, SetVolumeOwnership(context.Background(), dir, nil, nil, false))
	if gid, _ := groupAndMode(t, filepath.Join(dir, "sub", "f")); gid != 3000 {
		t.Errorf("no fsGroup changed the group")
	}
}

func fsGroupPod(uid string, policy *v1.PodFSGroupChangePolicy, vols ...v1.Volume) *v1.Pod {
	p := &v1.Pod{}
	p.Name, p.Namespace, p.UID = "p", "ns", types.UID("uid-"+uid)
	p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](2000), FSGroupChangePolicy: policy}
	p.Spec.Containers = []v1.Container{{Name: "c"}}
	p.Spec.Volumes = vols
	return p
}

// An emptyDir gets the fsGroup when first set up by a process (a new pod, or
// after a restart), never on later syncs; after a restart OnRootMismatch
// leaves a volume whose root is right alone, Always walks it again.
func TestEmptyDirFSGroupOnce(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	for _, tc := range []struct {
		policy       *v1.PodFSGroupChangePolicy
		afterRestart int
	}{
		{ptr.To(v1.FSGroupChangeOnRootMismatch), 3000},
		{ptr.To(v1.FSGroupChangeAlways), 2000},
		{nil, 2000},
	} {
		pods := t.TempDir()
		pod := fsGroupPod("e", tc.policy, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
		m := newManager(t, ManagerConfig{PodsDir: pods})
		paths, err := m.Setup(ctx, pod)
		must(t, err)
		dir := paths["data"]
		if gid, mode := groupAndMode(t, dir); gid != 2000 || mode != 0o777|os.ModeSetgid {
			t.Fatalf("emptyDir root gid %d mode %v, want 2000 2777", gid, mode)
		}
		f := filepath.Join(dir, "f")
		must(t, os.WriteFile(f, []byte("x"), 0o600))
		must(t, os.Chown(f, -1, 3000))
		_, err = m.Setup(ctx, pod)
		must(t, err)
		if gid, _ := groupAndMode(t, f); gid != 3000 {
			t.Errorf("policy %v: a later sync walked the emptyDir", tc.policy)
		}
		restarted := newManager(t, ManagerConfig{PodsDir: pods})
		_, err = restarted.Setup(ctx, pod)
		must(t, err)
		if gid, _ := groupAndMode(t, f); gid != tc.afterRestart {
			t.Errorf("policy %v: after a restart the file has gid %d, want %d", tc.policy, gid, tc.afterRestart)
		}
		must(t, restarted.Teardown(pod.UID))
	}
}

func TestProjectionFSGroup(t *testing.T) {
	requireRoot(t)
	m := newManager(t, ManagerConfig{PodsDir: t.TempDir()})
	pod := fsGroupPod("d", nil, v1.Volume{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		Items: []v1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			{Path: "sub/ns", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}, Mode: ptr.To[int32](0o400)},
		}}}})
	paths, err := m.Setup(context.Background(), pod)
	must(t, err)
	dir := paths["info"]
	for p, want := range map[string]os.FileMode{
		dir:                                  0o755 | os.ModeSetgid,
		filepath.Join(dir, "..data", "name"): 0o644,
		filepath.Join(dir, "..data", "sub"):  0o755 | os.ModeSetgid,
		filepath.Join(dir, "..data", "sub", "ns"): 0o440,
	} {
		if gid, mode := groupAndMode(t, p); gid != 2000 || mode != want {
			t.Errorf("%s: gid %d mode %v, want 2000 %v", p, gid, mode, want)
		}
	}
	if gid, _ := groupAndMode(t, filepath.Join(dir, "..data")); gid != 2000 {
		t.Errorf("..data link gid %d", gid)
	}
	// Unchanged: not rewritten (modes and owners are what same() expects).
	first, _ := os.Readlink(filepath.Join(dir, "..data"))
	_, err = m.Setup(context.Background(), pod)
	must(t, err)
	if again, _ := os.Readlink(filepath.Join(dir, "..data")); again != first {
		t.Errorf("an unchanged volume with an fsGroup was rewritten")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A memory emptyDir is a tmpfs of the kernel's default mode 1777, kept (the
// sticky bit too) when the fsGroup adds setgid, as upstream: 3777.
func TestMemoryEmptyDirMode(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	m := newManager(t, ManagerConfig{PodsDir: t.TempDir()})
	pod := fsGroupPod("m", nil, v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}})
	paths, err := m.Setup(ctx, pod)
	must(t, err)
	defer func() { must(t, m.Teardown(pod.UID)) }()
	info, err := os.Stat(paths["mem"])
	must(t, err)
	if mode := info.Mode() & (os.ModePerm | os.ModeSetgid | os.ModeSticky); mode != 0o777|os.ModeSetgid|os.ModeSticky {
		t.Fatalf("memory emptyDir mode %v, want 3777", mode)
	}
}
