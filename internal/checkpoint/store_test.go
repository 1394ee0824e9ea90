package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func pod(uid, name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "ns"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
}

func newStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(t.TempDir(), "checkpoints")
	}
	if cfg.Clock == nil {
		cfg.Clock = clocktesting.NewFakeClock(time.Unix(1700000000, 0))
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSaveLoadRemove(t *testing.T) {
	s := newStore(t, Config{})
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"}, Data: map[string]string{"k": "v"}}
	if err := s.Save(&Entry{Pod: pod("b", "web-b"), ConfigMaps: []*v1.ConfigMap{cm}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(&Entry{Pod: pod("a", "web-a")}); err != nil {
		t.Fatal(err)
	}
	got, errs := s.Load()
	if len(errs) != 0 || len(got) != 2 || got[0].Pod.Name != "web-a" || got[1].ConfigMaps[0].Data["k"] != "v" ||
		!got[0].SavedAt.Equal(time.Unix(1700000000, 0)) {
		t.Fatalf("loaded %+v %v", got, errs)
	}
	for _, p := range []string{s.cfg.Dir, filepath.Join(s.cfg.Dir, "a.json")} {
		fi, err := os.Stat(p)
		want := os.FileMode(0o600)
		if p == s.cfg.Dir {
			want = 0o700 | os.ModeDir
		}
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v %v, want %v", p, fi.Mode(), err, want)
		}
	}
	if err := s.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("a"); err != nil {
		t.Errorf("removing twice: %v", err)
	}
	if got, _ := s.Load(); len(got) != 1 || got[0].Pod.UID != "b" {
		t.Errorf("after Remove: %+v", got)
	}
}

// A corrupt, partial, foreign or misplaced entry is reported and skipped;
// the others load.
func TestLoadSkipsBadEntries(t *testing.T) {
	s := newStore(t, Config{})
	for _, uid := range []string{"good", "flipped", "cut", "moved"} {
		if err := s.Save(&Entry{Pod: pod(uid, uid)}); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(s.path("flipped"))
	_ = os.WriteFile(s.path("flipped"), []byte(strings.Replace(string(b), `flipped`, `flopped`, 1)), 0o600)
	b, _ = os.ReadFile(s.path("cut"))
	_ = os.WriteFile(s.path("cut"), b[:len(b)/2], 0o600)
	b, _ = os.ReadFile(s.path("moved"))
	_ = os.WriteFile(s.path("elsewhere"), b, 0o600)
	_ = os.Remove(s.path("moved"))
	_ = os.WriteFile(s.path("old"), []byte(`{"version":0,"checksum":"","data":{}}`), 0o600)
	_ = os.WriteFile(filepath.Join(s.cfg.Dir, ".tmp-123"), []byte("partial"), 0o600)

	got, errs := s.Load()
	if len(got) != 1 || got[0].Pod.UID != "good" {
		t.Errorf("loaded %d entries, want only good", len(got))
	}
	all := ""
	for _, e := range errs {
		all += e.Error() + "\n"
	}
	for _, want := range []string{"flipped.json: checksum mismatch", "cut.json: not a whole checkpoint entry",
		"elsewhere.json: entry of pod UID moved", "old.json: checkpoint format version 0"} {
		if !strings.Contains(all, want) {
			t.Errorf("errors lack %q:\n%s", want, all)
		}
	}
	if len(errs) != 4 {
		t.Errorf("%d errors, want 4:\n%s", len(errs), all)
	}
}

func TestBounds(t *testing.T) {
	size := func(e *Entry) int64 {
		c := *e
		c.SavedAt = time.Unix(1700000000, 0).UTC()
		b, err := Encode(&c)
		if err != nil {
			t.Fatal(err)
		}
		return int64(len(b))
	}
	mid := &v1.ConfigMap{Data: map[string]string{"k": strings.Repeat("x", 1500)}}
	small, medium := size(&Entry{Pod: pod("a", "a")}), size(&Entry{Pod: pod("c", "c"), ConfigMaps: []*v1.ConfigMap{mid}})
	cfg := Config{MaxEntryBytes: medium, MaxTotalBytes: small + medium + medium/2}
	s := newStore(t, cfg)
	if err := s.Save(&Entry{Pod: pod("a", "a")}); err != nil {
		t.Fatal(err)
	}
	big := &v1.ConfigMap{Data: map[string]string{"k": strings.Repeat("x", 3000)}}
	if err := s.Save(&Entry{Pod: pod("b", "b"), ConfigMaps: []*v1.ConfigMap{big}}); err == nil || !strings.Contains(err.Error(), "an entry may take") {
		t.Errorf("a too large entry: %v", err)
	}
	if err := s.Save(&Entry{Pod: pod("c", "c"), ConfigMaps: []*v1.ConfigMap{mid}}); err != nil {
		t.Fatalf("within the bounds: %v", err)
	}
	// Replacing an entry counts its new size, not both: a grown to medium
	// takes the store over its total.
	if err := s.Save(&Entry{Pod: pod("a", "a"), ConfigMaps: []*v1.ConfigMap{mid}}); err == nil || !strings.Contains(err.Error(), "the store would take") {
		t.Errorf("over the total: %v", err)
	}
	if err := s.Save(&Entry{Pod: pod("c", "c")}); err != nil {
		t.Errorf("replacing c by a smaller entry: %v", err)
	}
	// The sizes are known again after a restart.
	cfg.Dir = s.cfg.Dir
	s2 := newStore(t, cfg)
	if err := s2.Save(&Entry{Pod: pod("d", "d"), ConfigMaps: []*v1.ConfigMap{mid}}); err != nil {
		t.Errorf("a medium entry beside two small ones after a restart: %v", err)
	}
	if err := s2.Save(&Entry{Pod: pod("e", "e"), ConfigMaps: []*v1.ConfigMap{mid}}); err == nil {
		t.Error("the total forgotten after a restart")
	}
}

func TestPrune(t *testing.T) {
	s := newStore(t, Config{})
	for _, uid := range []string{"keep", "gone"} {
		if err := s.Save(&Entry{Pod: pod(uid, uid)}); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.WriteFile(filepath.Join(s.cfg.Dir, ".tmp-9"), nil, 0o600)
	if err := s.Prune(func(uid types.UID) bool { return uid == "keep" }); err != nil {
		t.Fatal(err)
	}
	names, _ := os.ReadDir(s.cfg.Dir)
	if len(names) != 1 || names[0].Name() != "keep.json" {
		t.Errorf("left %v", names)
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New without a Dir")
	}
}
