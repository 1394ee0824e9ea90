package main

import (
	"strings"
	"testing"
	"time"
)

func TestReport(t *testing.T) {
	s := report([]Result{
		{Agent: "upstream", SteadyKept: true, DoomedRunning: true, Converged: -1, NotConverged: "fresh has 0 ready sandboxes", MaxReadySandbox: 1},
		{Agent: "nodelet", SteadyKept: true, CrasherRestarts: 2, DoomedRunning: true, RebootRunning: []string{"steady", "crasher", "doomed"},
			RebootAllRunning: 0.62, Converged: 0.86, MaxReadySandbox: 1},
	}, time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	for _, want := range []string{
		"on 2026-12-02",
		"| upstream | yes | 0 times | yes | none | not within 45 s | not within 2 min: fresh has 0 ready sandboxes | 1 |",
		"| nodelet | yes | 2 times | yes | steady, crasher, doomed | 0.6 s | 0.9 s | 1 |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}
