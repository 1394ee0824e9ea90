package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// testdata/upstream_allocated_pods_state was written by upstream v1.37.2's
// state.NewStateCheckpoint(...).SetPodResourceInfo (a program built
// against k8s.io/kubernetes): nodelet reads it, and writes the same bytes
// for the same record.
func TestUpstreamCheckpoint(t *testing.T) {
	want, err := os.ReadFile("testdata/upstream_allocated_pods_state")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, AllocatedFile), want, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, AllocatedFile)
	if err != nil {
		t.Fatalf("Open(upstream's checkpoint): %v", err)
	}
	c1, ok := s.Container("uid-1", "c1")
	if !ok || c1.Limits.Cpu().MilliValue() != 200 || c1.Requests.Memory().Value() != 64<<20 {
		t.Fatalf("c1 = %v, %v; want upstream's record", c1, ok)
	}
	if _, ok := s.Container("uid-1", "sidecar"); !ok {
		t.Fatalf("sidecar's record lost")
	}
	// Written again from nodelet's own record: upstream's bytes.
	info, _ := s.Pod("uid-1")
	out := t.TempDir()
	w, err := Open(out, AllocatedFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.SetPod("uid-1", info); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(out, AllocatedFile))
	if string(got) != string(want) {
		t.Errorf("written:\n%s\nupstream's:\n%s", got, want)
	}
}

func TestStateRoundTripAndOrphans(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, ActuatedFile)
	if err != nil {
		t.Fatal(err)
	}
	r := v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}}
	for _, uid := range []types.UID{"a", "b"} {
		if err := s.SetContainer(uid, "c", r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RemoveOrphans(func(uid types.UID) bool { return uid == "a" }); err != nil {
		t.Fatal(err)
	}
	again, err := Open(dir, ActuatedFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := again.Container("a", "c"); !ok {
		t.Errorf("a's record not kept across a restart")
	}
	if _, ok := again.Pod("b"); ok {
		t.Errorf("b's record not removed")
	}
	// A copy handed out does not change the state.
	got, _ := again.Container("a", "c")
	got.Limits[v1.ResourceMemory] = resource.MustParse("1Mi")
	if again2, _ := again.Container("a", "c"); again2.Limits.Memory().Value() != 1<<30 {
		t.Errorf("the state shares its maps with callers")
	}
}

func TestCorruptCheckpointNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, AllocatedFile)
	if err := os.WriteFile(p, []byte(`{"data":"{}","checksum":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, AllocatedFile)
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("Open(corrupt) = %v, want an error naming %s", err, p)
	}
}

func TestMemoryOnly(t *testing.T) {
	s, err := Open("", AllocatedFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetPod("x", PodResourceInfo{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Pod("x"); !ok {
		t.Error("memory-only state lost its record")
	}
}
