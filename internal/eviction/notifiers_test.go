package eviction

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/internal/machine"
)

func TestMemoryNotifiers(t *testing.T) {
	usage := func() (int64, error) { return 1, nil }
	v2 := t.TempDir()
	if err := os.MkdirAll(filepath.Join(v2, "kubepods"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v2, "kubepods", "memory.events"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	both := []Threshold{{Signal: MemoryAvailable}, {Signal: AllocatableMemoryAvailable}, {Signal: NodeFsAvailable}}
	for _, tc := range []struct {
		name       string
		thresholds []Threshold
		cgroups    machine.Cgroups
		want       []Signal
		wantErr    string
	}{
		{name: "v2: polls for both", thresholds: both, cgroups: machine.Cgroups{Mount: v2, V2: true}, want: []Signal{AllocatableMemoryAvailable, MemoryAvailable}},
		{name: "v2: only the signals with a threshold", thresholds: both[:1], cgroups: machine.Cgroups{Mount: v2, V2: true}, want: []Signal{MemoryAvailable}},
		{name: "v2 without the pods' memory.events", thresholds: both, cgroups: machine.Cgroups{Mount: t.TempDir(), V2: true},
			want: []Signal{MemoryAvailable}, wantErr: "allocatableMemory.available: watch"},
		{name: "v1 without the kernel's thresholds", thresholds: both, cgroups: machine.Cgroups{Mount: t.TempDir()},
			wantErr: "memory.available: memory threshold notifications"},
		{name: "no cgroup mount", thresholds: both, wantErr: "no cgroup mount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MemoryNotifiers(tc.thresholds, NotifiersConfig{Cgroups: tc.cgroups, PodsCgroup: "/kubepods", NodeMemoryUsage: usage, PodsMemoryUsage: usage})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			var signals []Signal
			for s, n := range got {
				signals = append(signals, s)
				n.Close()
			}
			slices.Sort(signals)
			if !slices.Equal(signals, tc.want) {
				t.Errorf("notifiers for %v, want %v", signals, tc.want)
			}
		})
	}
}
