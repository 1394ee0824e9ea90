package main

import (
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	r := &AgentResult{Agent: "a", Runs: []Run{
		{Signal: "memory", Outcome: "evicted", ToCondition: 0.1, ToEviction: 0.3},
		{Signal: "memory", Outcome: "oom-killed", OOMKills: 1, LimitHits: 20, ToCondition: -1, ToEviction: -1},
		{Signal: "memory", Outcome: "evicted-at-limit", OOMKills: 0, LimitHits: 3, ToCondition: 2, ToEviction: 5},
		{Signal: "disk", Outcome: "evicted", ToCondition: 1, ToEviction: 2},
	}}
	s := summarize(r, "memory")
	if s.runs != 3 || s.evicted != 1 || s.oomRuns != 1 || s.limitRuns != 2 || s.oomKills != 1 {
		t.Errorf("counts %+v", s)
	}
	// The never-happened run is left out of the medians.
	if s.toCondition != 1.05 || s.toEvict != 2.65 || s.minEvict != 0.3 || s.maxEvict != 5 {
		t.Errorf("times %+v", s)
	}
	if m := median(nil); m != -1 {
		t.Errorf("median of nothing %v", m)
	}
	sec := section(&Results{Date: "d", Machine: "m", Agents: []*AgentResult{r}})
	if !strings.Contains(sec, "| memory | hog evicted before the pods' cgroup reached its limit (runs) | 1 of 3 |") ||
		!strings.Contains(sec, "| disk | threshold crossed -> pod evicted, median (min-max) (s) | 2.0 (2.0-2.0) |") {
		t.Errorf("section:\n%s", sec)
	}
}
