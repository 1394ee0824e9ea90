package stats

import (
	"testing"
	"time"
)

func TestRateCache(t *testing.T) {
	const s = int64(time.Second)
	type step struct {
		nanos    uint64
		at       int64
		wantRate uint64
		wantOK   bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{
			name:  "first sample has no rate",
			steps: []step{{nanos: 100, at: 10 * s}},
		},
		{
			name: "rate over the window",
			steps: []step{
				{nanos: 0, at: 10 * s},
				{nanos: uint64(5 * s), at: 20 * s, wantRate: 500_000_000, wantOK: true},      // 0.5 core
				{nanos: uint64(15 * s), at: 25 * s, wantRate: 2_000_000_000, wantOK: true},   // 2 cores
				{nanos: uint64(15 * s), at: 35 * s, wantRate: 0, wantOK: true},               // idle
				{nanos: uint64(15*s + s/4), at: 36 * s, wantRate: 250_000_000, wantOK: true}, // exactly minWindow
			},
		},
		{
			name: "short first window is used, short later windows reuse the rate",
			steps: []step{
				{nanos: 0, at: 10 * s},
				{nanos: uint64(s / 40), at: 10*s + s/10, wantRate: 250_000_000, wantOK: true}, // 100ms resample
				{nanos: uint64(s), at: 10*s + s/5, wantRate: 250_000_000, wantOK: true},       // 100ms later: cached
				// The base is still the 100ms sample: (1.125s - 0.025s) / 1s.
				{nanos: uint64(s + s/8), at: 11*s + s/10, wantRate: 1_100_000_000, wantOK: true},
			},
		},
		{
			name: "older or same-time sample reuses the rate",
			steps: []step{
				{nanos: 0, at: 10 * s},
				{nanos: uint64(s), at: 12 * s, wantRate: 500_000_000, wantOK: true},
				{nanos: uint64(s / 2), at: 11 * s, wantRate: 500_000_000, wantOK: true},
				{nanos: uint64(s), at: 12 * s, wantRate: 500_000_000, wantOK: true},
			},
		},
		{
			name: "counter reset restarts",
			steps: []step{
				{nanos: uint64(10 * s), at: 10 * s},
				{nanos: uint64(11 * s), at: 12 * s, wantRate: 500_000_000, wantOK: true},
				{nanos: 5, at: 14 * s},
				{nanos: uint64(s) + 5, at: 16 * s, wantRate: 500_000_000, wantOK: true},
			},
		},
		{
			name: "same time before any rate",
			steps: []step{
				{nanos: 0, at: 10 * s},
				{nanos: 10, at: 10 * s},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newRateCache(time.Second)
			for i, st := range tc.steps {
				got, ok := c.update("k", cpuSample{nanos: st.nanos, at: st.at})
				if ok != st.wantOK || got != st.wantRate {
					t.Errorf("step %d: got (%d, %v), want (%d, %v)", i, got, ok, st.wantRate, st.wantOK)
				}
			}
		})
	}
}

func TestRateCachePrune(t *testing.T) {
	c := newRateCache(time.Second)
	for _, k := range []string{nodeKey, podPrefix + "a", podPrefix + "b", ctrPrefix + "x", ctrPrefix + "y"} {
		c.update(k, cpuSample{nanos: 1, at: 1})
	}
	c.prune(map[string]struct{}{podPrefix + "a": {}, ctrPrefix + "y": {}})
	if c.len() != 3 {
		t.Fatalf("len = %d, want 3 (node, pod a, container y)", c.len())
	}
	for _, k := range []string{nodeKey, podPrefix + "a", ctrPrefix + "y"} {
		if _, ok := c.m[k]; !ok {
			t.Errorf("%s was pruned", k)
		}
	}
}
