package volumes

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	files := map[string]file{"a": {[]byte("1"), 0o644, -1}, "sub/b": {[]byte("2"), 0o600, -1}}
	if err := writeAtomic(dir, files, -1); err != nil {
		t.Fatal(err)
	}
	first, _ := os.Readlink(filepath.Join(dir, "..data"))
	for p, want := range map[string]string{"a": "1", "sub/b": "2"} {
		got, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q %v", p, got, err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, "sub/b")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	if l, _ := os.Readlink(filepath.Join(dir, "a")); l != "..data/a" {
		t.Errorf("a is not a link through ..data: %q", l)
	}
	// Unchanged content: nothing rewritten.
	if err := writeAtomic(dir, files, -1); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.Readlink(filepath.Join(dir, "..data")); again != first {
		t.Errorf("unchanged content rewrote ..data: %s -> %s", first, again)
	}
	// A change swaps ..data; a dropped key disappears; the old version goes.
	if err := writeAtomic(dir, map[string]file{"a": {[]byte("3"), 0o644, -1}}, -1); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "a")); string(got) != "3" {
		t.Errorf("a after update: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub")); !os.IsNotExist(err) {
		t.Errorf("dropped key still visible")
	}
	if _, err := os.Stat(filepath.Join(dir, first)); !os.IsNotExist(err) {
		t.Errorf("old version %s kept", first)
	}
	// Paths escaping the volume are refused.
	if err := writeAtomic(dir, map[string]file{"../x": {[]byte("no"), 0o644, -1}}, -1); err == nil {
		t.Error("../x accepted")
	}
}

func TestDownwardAndItems(t *testing.T) {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace = "p", "ns"
	pod.Labels = map[string]string{"b": "2", "a": "1"}
	files := map[string]file{}
	m := newManager(t, ManagerConfig{PodsDir: t.TempDir()})
	err := m.downward(pod, []v1.DownwardAPIVolumeFile{
		{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
		{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
	}, 0o644, files)
	if err != nil || string(files["namespace"].data) != "ns" || string(files["labels"].data) != "a=\"1\"\nb=\"2\"" {
		t.Errorf("downward files %v %v", files, err)
	}
	data := map[string][]byte{"k1": []byte("v1"), "k2": []byte("v2")}
	files = map[string]file{}
	mode := int32(0o400)
	if err := items(data, []v1.KeyToPath{{Key: "k2", Path: "dir/two", Mode: &mode}}, nil, 0o644, files, "cm"); err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || string(files["dir/two"].data) != "v2" || files["dir/two"].mode != 0o400 {
		t.Errorf("items: %v", files)
	}
	if err := items(data, []v1.KeyToPath{{Key: "nope", Path: "x"}}, nil, 0o644, map[string]file{}, "cm"); err == nil {
		t.Error("a missing key of a non-optional source was accepted")
	}
}
