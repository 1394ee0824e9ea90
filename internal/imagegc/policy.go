package imagegc

import (
	"sort"
	"time"
)

// Record is what is known about an image: its size, when it was first
// seen and last used by a container, and whether it must stay (pinned by
// the runtime, or its sandbox image).
type Record struct {
	ID            string    `json:"-"`
	Size          int64     `json:"-"`
	FirstDetected time.Time `json:"firstDetected"`
	LastUsed      time.Time `json:"lastUsed"`
	Pinned        bool      `json:"-"`
}

// Candidates are the images that may go, least recently used first (then
// first seen first), as upstream: not in use now and not pinned.
func Candidates(records map[string]*Record, inUse map[string]bool) []Record {
	var out []Record
	for id, r := range records {
		if inUse[id] || r.Pinned {
			continue
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].LastUsed.Equal(out[j].LastUsed) {
			return out[i].LastUsed.Before(out[j].LastUsed)
		}
		if !out[i].FirstDetected.Equal(out[j].FirstDetected) {
			return out[i].FirstDetected.Before(out[j].FirstDetected)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// ToFree is how many bytes to free on an image filesystem of capacity with
// available left: enough to be back at low percent used, once it is at
// high percent or more; 0 otherwise.
func ToFree(capacity, available int64, high, low int) int64 {
	if capacity <= 0 {
		return 0
	}
	available = min(available, capacity)
	used := 100 - int(available*100/capacity)
	if used < high {
		return 0
	}
	return capacity*int64(100-low)/100 - available
}

// UsedPercent is the image filesystem's usage, as upstream computes it.
func UsedPercent(capacity, available int64) int {
	if capacity <= 0 {
		return 0
	}
	return 100 - int(min(available, capacity)*100/capacity)
}

// Old are the candidates not used for maxAge at now (0: none), once the
// collector has run maxAge (before that, the last-used times are not
// trustworthy: upstream's rule).
func Old(cands []Record, now, began time.Time, maxAge time.Duration) []Record {
	if maxAge <= 0 || now.Sub(began) <= maxAge {
		return nil
	}
	var out []Record
	for _, c := range cands {
		if now.Sub(c.LastUsed) > maxAge {
			out = append(out, c)
		}
	}
	return out
}

// ForSpace are the candidates to remove to free bytes, in order, skipping
// the images first seen less than minAge before now (just pulled, about to
// be used); bytes < 0 means every one that may go.
func ForSpace(cands []Record, bytes int64, now time.Time, minAge time.Duration) []Record {
	var out []Record
	var freed int64
	for _, c := range cands {
		if bytes >= 0 && freed >= bytes {
			break
		}
		if !c.LastUsed.Before(now) || now.Sub(c.FirstDetected) < minAge {
			continue
		}
		out = append(out, c)
		freed += c.Size
	}
	return out
}
