package checkpoint

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/ctortest"
)

func TestNew(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pods")
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no dir", Config: Config{}, WantErr: "Config.Dir is required"},
		{Name: "defaults", Config: Config{Dir: dir}},
	}, func(t *testing.T, s *Store) {
		ctortest.RealClock(t, s.cfg.Clock)
		if s.cfg.MaxEntryBytes != DefaultMaxEntryBytes || s.cfg.MaxTotalBytes != DefaultMaxTotalBytes {
			t.Errorf("bounds %d/%d, want the defaults %d/%d", s.cfg.MaxEntryBytes, s.cfg.MaxTotalBytes, DefaultMaxEntryBytes, DefaultMaxTotalBytes)
		}
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("dir mode %v, want 0700", fi.Mode().Perm())
		}
	})
}

func TestNewManager(t *testing.T) {
	pods := func() []*v1.Pod { return nil }
	status := func(types.UID) (v1.PodStatus, uint64, bool) { return v1.PodStatus{}, 0, false }
	dir := t.TempDir()
	ctortest.Run(t, NewManager, []ctortest.Case[ManagerConfig]{
		{Name: "no dir", Config: ManagerConfig{Pods: pods, Status: status}, WantErr: "ManagerConfig.Dir is required"},
		{Name: "no pods", Config: ManagerConfig{Dir: dir, Status: status}, WantErr: "ManagerConfig.Pods is required"},
		{Name: "no status", Config: ManagerConfig{Dir: dir, Pods: pods}, WantErr: "ManagerConfig.Status is required"},
		{Name: "defaults", Config: ManagerConfig{Dir: dir, Pods: pods, Status: status}},
	}, func(t *testing.T, m *Manager) {
		ctortest.RealClock(t, m.cfg.Clock)
		if m.cfg.Period != DefaultPeriod {
			t.Errorf("period %v, want the default %v", m.cfg.Period, DefaultPeriod)
		}
		if m.cfg.Node == nil || m.cfg.Node() != nil {
			t.Error("Node: want a function returning no node before registration")
		}
		if m.store.cfg.Dir != filepath.Join(dir, "pods") {
			t.Errorf("entries in %s, want %s", m.store.cfg.Dir, filepath.Join(dir, "pods"))
		}
		if m.store.cfg.MaxEntryBytes != DefaultMaxEntryBytes {
			t.Errorf("entry bound %d, want the default %d", m.store.cfg.MaxEntryBytes, DefaultMaxEntryBytes)
		}
	})
}
