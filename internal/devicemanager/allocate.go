package devicemanager

import "slices"

// choose picks size devices for a container: those in reusable first (the
// devices of the pod's init containers that ran before it), then those the
// plugin prefers out of available, then the rest of available in order.
// reusable and available must not overlap. It fails (false) when the two
// have fewer than size devices.
func choose(reusable, available []string, size int, preferred []string) ([]string, bool) {
	var out []string
	for _, id := range sorted(reusable) {
		if len(out) == size {
			return out, true
		}
		out = append(out, id)
	}
	if len(out) == size {
		return out, true
	}
	avail := sorted(available)
	if len(avail) < size-len(out) {
		return nil, false
	}
	for _, id := range preferred {
		if len(out) == size {
			break
		}
		if slices.Contains(avail, id) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	for _, id := range avail {
		if len(out) == size {
			break
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, true
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
