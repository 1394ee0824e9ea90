package main

import (
	"strings"
	"testing"
	"time"
)

func TestReport(t *testing.T) {
	full := Run{NodeNotReady: 0.2, LockReleased: 20.1, PowerOff: 20.1, LocksReleased: true, NotReadyReason: "KubeletNotReady: node is shutting down",
		Pods: map[string]float64{"period-5": 5.3, "period-120": 10.2, "period-critical-5": 15.3, "period-critical-120": 20.3}}
	partial := Run{NodeNotReady: 0.4, LockReleased: -1, PowerOff: 20, FailedAndReady: 2,
		Pods: map[string]float64{"period-5": 5.5, "period-120": 10.4}}
	s := report([]AgentResult{
		{Agent: "nodelet", Runs: []Run{full, full}, Cancels: []Cancel{{NodeReady: 0.3, Stopped: []string{}}, {NodeReady: 0.5}}},
		{Agent: "upstream", Runs: []Run{partial, full}, Cancels: []Cancel{{NodeReady: 18, Stopped: []string{"period-120", "period-5"}}, {NodeReady: -1}}},
	},
		time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	for _, want := range []string{
		"on 2026-12-02",
		"| nodelet | 2 | 0.2 | 5.3 | 10.2 | 15.3 | 20.3 | 20.1 | 20.1 | 2/2 | 0 |",
		// Medians over the runs where it happened; the others counted.
		"| upstream | 2 | 0.3 | 5.4 | 10.3 | 15.3 (1/2 never) | 20.3 (1/2 never) | 20.1 (1/2 never) | 20.1 | 1/2 | 2 |",
		"| nodelet | 10.2 | 20.3 | KubeletNotReady: node is shutting down |",
		"| upstream | 10.3 | 20.3 (1/2 never) | KubeletNotReady",
		"| nodelet | 2 | 0.4 | none; none |",
		"| upstream | 2 | 18.0 (1/2 never) | period-120, period-5; none |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}
