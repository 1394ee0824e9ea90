package stats

import (
	"strings"
	"sync"
	"time"
)

// cpuSample is a cumulative CPU time and when it was read.
type cpuSample struct {
	nanos uint64 // cumulative CPU time, ns
	at    int64  // unix ns
}

type rateEntry struct {
	base    cpuSample // the sample the next rate is computed from
	rate    uint64    // nanocores, valid if hasRate
	hasRate bool
}

// Keys of the rate cache.
const (
	nodeKey      = "node"
	podPrefix    = "pod/"
	ctrPrefix    = "ctr/"
	minWindowDef = time.Second
)

// rateCache turns cumulative CPU counters into usageNanoCores. It keeps, per
// key, the sample the last rate was computed from; a new sample at least
// minWindow later yields a new rate and becomes the base, a closer one reuses
// the last rate (so that concurrent callers do not compute rates over a few
// milliseconds). Samples older than the base (callers racing) reuse the last
// rate; a counter that went backwards (a reset) restarts the entry.
type rateCache struct {
	mu        sync.Mutex
	minWindow time.Duration
	m         map[string]*rateEntry
}

func newRateCache(minWindow time.Duration) *rateCache {
	return &rateCache{minWindow: minWindow, m: make(map[string]*rateEntry)}
}

// update feeds s for key and returns the current rate, if one is known.
func (c *rateCache) update(key string, s cpuSample) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[key]
	if e == nil {
		c.m[key] = &rateEntry{base: s}
		return 0, false
	}
	dt := s.at - e.base.at
	if dt <= 0 {
		return e.rate, e.hasRate
	}
	if s.nanos < e.base.nanos {
		*e = rateEntry{base: s}
		return 0, false
	}
	if e.hasRate && time.Duration(dt) < c.minWindow {
		return e.rate, true
	}
	e.rate = uint64(float64(s.nanos-e.base.nanos) / float64(dt) * float64(time.Second))
	e.hasRate = true
	e.base = s
	return e.rate, true
}

// prune drops the pod and container entries whose keys are not in keep.
func (c *rateCache) prune(keep map[string]struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if !strings.HasPrefix(k, podPrefix) && !strings.HasPrefix(k, ctrPrefix) {
			continue
		}
		if _, ok := keep[k]; !ok {
			delete(c.m, k)
		}
	}
}

func (c *rateCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
