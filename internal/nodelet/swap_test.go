package nodelet

import (
	"testing"

	"k8s.io/client-go/tools/record"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/config"
	"github.com/nodelet/nodelet/internal/machine"
)

// failSwapOn as upstream: swap on refuses to start, with upstream's
// message, unless failSwapOn is false; unset is its default, true.
func TestCheckSwap(t *testing.T) {
	for _, tt := range []struct {
		name   string
		on     bool
		fail   *bool
		refuse bool
	}{
		{name: "off, unset"},
		{name: "off, true", fail: ptr.To(true)},
		{name: "off, false", fail: ptr.To(false)},
		{name: "on, unset (default true)", on: true, refuse: true},
		{name: "on, true", on: true, fail: ptr.To(true), refuse: true},
		{name: "on, false", on: true, fail: ptr.To(false)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSwap(&kubeletv1beta1.KubeletConfiguration{FailSwapOn: tt.fail}, machine.Facts{Swap: machine.Swap{On: tt.on}})
			if (err != nil) != tt.refuse {
				t.Fatalf("checkSwap = %v, want refusal %v", err, tt.refuse)
			}
			if err != nil && err.Error() != "running with swap on is not supported, please disable swap or set --fail-swap-on flag to false" {
				t.Errorf("not upstream's message: %v", err)
			}
		})
	}
}

// Upstream's Warning node event when swap is on and memory-backed volumes
// cannot be mounted noswap; none otherwise.
func TestWarnSwapTmpfs(t *testing.T) {
	for _, tt := range []struct {
		name string
		swap machine.Swap
		want string
	}{
		{name: "swap off, no noswap", swap: machine.Swap{}},
		{name: "swap off, noswap", swap: machine.Swap{TmpfsNoswap: true}},
		{name: "swap on, noswap", swap: machine.Swap{On: true, TmpfsNoswap: true}},
		{name: "swap on, no noswap", swap: machine.Swap{On: true},
			want: "Warning PossibleMemoryBackedVolumesOnDisk The tmpfs noswap option is not supported. Memory-backed volumes (e.g. secrets, emptyDirs, etc.) might be swapped to disk and should no longer be considered secure."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(2)
			n := &Nodelet{opts: &config.Options{NodeName: "node1"}, recorder: rec}
			n.warnSwapTmpfs(machine.Facts{Swap: tt.swap})
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			switch {
			case tt.want == "" && len(got) != 0:
				t.Errorf("events %q, want none", got)
			case tt.want != "" && (len(got) != 1 || got[0] != tt.want):
				t.Errorf("events %q, want %q", got, tt.want)
			}
		})
	}
}
