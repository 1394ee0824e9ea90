package devicemanager

import (
	"slices"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodelet/nodelet/internal/bitmask"
)

// choose picks size devices for a container, as upstream's
// devicesToAllocate: those in reusable first (the devices of the pod's
// init containers that ran before it); then, when the devices on the
// affinity's NUMA nodes (aligned) are more than what is left to take,
// the plugin's preferred ones among them and the rest of them; else all
// the aligned ones, the plugin's preferred ones, the unaligned ones and
// those without a NUMA node. preferred asks the plugin
// (GetPreferredAllocation; nil when it has none) for a choice among
// avail that includes must. The four sets must not overlap. It fails
// (false) when they have fewer than size devices.
func choose(reusable, aligned, unaligned, noAffinity []string, size int, preferred func(avail, must []string) []string) ([]string, bool) {
	var out []string
	take := func(from []string) bool {
		for _, id := range from {
			if len(out) == size {
				break
			}
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
		return len(out) == size
	}
	if take(sorted(reusable)) {
		return out, true
	}
	aligned, unaligned, noAffinity = sorted(aligned), sorted(unaligned), sorted(noAffinity)
	available := slices.Concat(aligned, unaligned, noAffinity)
	if len(available) < size-len(out) {
		return nil, false
	}
	among := func(set []string) []string {
		return slices.DeleteFunc(slices.Clone(preferred(slices.Concat(set, out), slices.Clone(out))), func(id string) bool { return !slices.Contains(set, id) })
	}
	if size-len(out) < len(aligned) {
		if take(among(aligned)) || take(aligned) {
			return out, true
		}
		return nil, false
	}
	if take(aligned) || take(among(available)) || take(unaligned) || take(noAffinity) {
		return out, true
	}
	return nil, false
}

// byAffinity splits available by the devices' NUMA nodes (upstream's
// filterByAffinity): on a node of affinity, on other nodes, on none.
func byAffinity(devices map[string]*pluginapi.Device, available []string, affinity bitmask.Mask) (aligned, unaligned, noAffinity []string) {
	for _, id := range available {
		switch nodes := deviceNodes(devices[id]); {
		case nodes == 0:
			noAffinity = append(noAffinity, id)
		case nodes&affinity != 0:
			aligned = append(aligned, id)
		default:
			unaligned = append(unaligned, id)
		}
	}
	return aligned, unaligned, noAffinity
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
