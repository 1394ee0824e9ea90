package main

import (
	"strings"
	"testing"
	"time"
)

func TestReport(t *testing.T) {
	s := report([]Result{
		{Agent: "upstream", Signing: "3m", ToReady: 0.83, Client: &Rotation{OldSerial: "123456789012", NewSerial: "42", At: 455, Fraction: 0.76},
			Checks: 240, NotReady: 1, LogReads: 50, LogFailures: 2, FirstLogError: "x509: certificate has expired"},
		{Agent: "nodelet", ToReady: 0.39, Client: &Rotation{OldSerial: "1", NewSerial: "2", At: 480, Fraction: 0.8},
			Serving: &Rotation{OldSerial: "3", NewSerial: "4", At: 500, Fraction: 0.83}, Checks: 250, LogReads: 51},
	}, time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	for _, want := range []string{
		"on 2026-12-02",
		"certificates live 3m\n",
		"| upstream | 0.83 s | 455 s (76% of its life), serial …56789012 -> 42 | not renewed | 1 of 240 | 2 of 50 |",
		"| nodelet | 0.39 s | 480 s (80% of its life), serial 1 -> 2 | 500 s (83% of its life), serial 3 -> 4 | 0 of 250 | 0 of 51 |",
		"upstream's first failed log read: `x509: certificate has expired`",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}
