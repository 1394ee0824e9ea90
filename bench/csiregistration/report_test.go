package main

import (
	"strings"
	"testing"
	"time"
)

func TestReport(t *testing.T) {
	s := report([]AgentResult{
		{Agent: "upstream", Runs: []Run{{Register: 1.2, RegisterRetry: -1, Deregister: 0.5}, {Register: 1.0, RegisterRetry: -1, Deregister: 0.7}}},
		{Agent: "nodelet", Runs: []Run{{Register: 0.3, RegisterRetry: 3.1, Deregister: 0.4}}},
	}, time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	for _, want := range []string{
		"on 2026-12-02",
		"| upstream | 1.10 (2/2) | never (0/2) | 0.60 (2/2) |",
		"| nodelet | 0.30 (1/1) | 3.10 (1/1) | 0.40 (1/1) |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}
