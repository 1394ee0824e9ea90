package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3}
	if got := percentile(v, 50); got != 3 {
		t.Errorf("p50 %v", got)
	}
	if got := percentile(v, 99); got != 5 {
		t.Errorf("p99 %v", got)
	}
	if got := percentile([]float64{1, math.Inf(1)}, 99); got != -1 {
		t.Errorf("a miss at p99: %v", got)
	}
}

func TestReport(t *testing.T) {
	out := report([]Result{{Agent: "upstream", Resizes: 50, CgroupP50: 512, CgroupP99: 1200, StatusP50: 900, StatusP99: -1, Missed: 1},
		{Agent: "nodelet", Resizes: 50, CgroupP50: 40, CgroupP99: 80, StatusP50: 60, StatusP99: 120, NoRestart: true}}, time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	for _, want := range []string{"| | upstream | nodelet |", "p50 | 512 | 40 |", "p99 | not within the wait | 120 |", "| container never restarted | no | yes |", "on 2026-12-07"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
