package main

import (
	"fmt"
	"strings"
	"time"
)

func rotated(r *Rotation) string {
	if r == nil {
		return "not renewed"
	}
	return fmt.Sprintf("%.0f s (%.0f%% of its life), serial %s -> %s", r.At, 100*r.Fraction, short(r.OldSerial), short(r.NewSerial))
}

// short is a serial number's last 8 digits.
func short(s string) string {
	if len(s) > 8 {
		return "…" + s[len(s)-8:]
	}
	return s
}

func report(results []Result, now time.Time) string {
	var b strings.Builder
	b.WriteString("## Certificate rotation, side by side (bench/rotation)\n\n")
	fmt.Fprintf(&b, "Written by `go run ./bench/rotation` on %s. Each agent joins as node bench-rotation with the bootstrap\n", now.UTC().Format("2006-01-02"))
	signing := "?"
	if len(results) > 0 && results[0].Signing != "" {
		signing = results[0].Signing
	}
	fmt.Fprintf(&b, "token alone, `rotateCertificates` and `serverTLSBootstrap`; certificates live %s\n", signing)
	b.WriteString("(`--cluster-signing-duration`, backdated 5 minutes by the signer), serving CSRs are approved by the benchmark. A pod logs every second; the Node's\n")
	b.WriteString("Ready condition is checked every 2 s and the pod's log read through the API server every 10 s until both\n")
	b.WriteString("certificates were renewed (times from the agent's start):\n\n")
	b.WriteString("| agent | start -> Ready | client certificate renewed | serving certificate renewed | NotReady checks | log reads failed |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %.2f s | %s | %s | %d of %d | %d of %d |\n", r.Agent, r.ToReady, rotated(r.Client), rotated(r.Serving),
			r.NotReady, r.Checks, r.LogFailures, r.LogReads)
	}
	for _, r := range results {
		if r.FirstLogError != "" {
			fmt.Fprintf(&b, "\n%s's first failed log read: `%s`\n", r.Agent, r.FirstLogError)
		}
	}
	return b.String()
}
