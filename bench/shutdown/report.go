package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

func median(v []float64) float64 {
	if len(v) == 0 {
		return -1
	}
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func secs(v float64) string {
	if v < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f", v)
}

// column is the median of f over the runs where it happened (>= 0), with
// the count of runs where it did not.
func column(runs []Run, f func(Run) float64) string {
	var v []float64
	missing := 0
	for _, r := range runs {
		if x := f(r); x >= 0 {
			v = append(v, x)
		} else {
			missing++
		}
	}
	s := secs(median(v))
	if missing > 0 {
		s += fmt.Sprintf(" (%d/%d never)", missing, len(runs))
	}
	return s
}

// groupDone is when a group's last pod was seen shut down (-1 if one never
// was).
func groupDone(r Run, critical bool) float64 {
	last := -1.0
	for _, p := range pods {
		if (p.class != "") != critical {
			continue
		}
		at, ok := r.Pods[p.name]
		if !ok {
			return -1
		}
		last = max(last, at)
	}
	return last
}

func report(results []AgentResult, now time.Time) string {
	var b strings.Builder
	b.WriteString("## Graceful node shutdown, side by side (bench/shutdown)\n\n")
	fmt.Fprintf(&b, "Written by `go run ./bench/shutdown` on %s. Each agent runs as node bench-shutdown with\n", now.UTC().Format("2006-01-02"))
	b.WriteString("`shutdownGracePeriod: 20s`, `shutdownGracePeriodCriticalPods: 10s`, on a private system bus with the fake logind\n")
	b.WriteString("(test/fakes/fakelogind, InhibitDelayMaxSec 5 s to be raised). Four SIGTERM-ignoring pods (upstream's e2e pods:\n")
	b.WriteString("grace 120 s and 5 s, regular and system-node-critical); the machine is powered off through logind. Medians, in\n")
	b.WriteString("seconds from PrepareForShutdown; a pod counts as stopped when the API shows it Failed/Terminated with\n")
	b.WriteString("ContainersReady False. Expected: regular pods by 10 s (5 s and 10 s), critical ones by 20 s (15 s and 20 s).\n\n")
	b.WriteString("| agent | runs | node NotReady | period-5 | period-120 | critical-5 | critical-120 | lock released | logind goes on | on the lock's release | Failed+Ready statuses |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		released, failedReady := 0, 0
		for _, run := range r.Runs {
			if run.LocksReleased {
				released++
			}
			failedReady += run.FailedAndReady
		}
		pod := func(name string) func(Run) float64 {
			return func(run Run) float64 {
				if at, ok := run.Pods[name]; ok {
					return at
				}
				return -1
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %d/%d | %d |\n", r.Agent, len(r.Runs),
			column(r.Runs, func(run Run) float64 { return run.NodeNotReady }),
			column(r.Runs, pod("period-5")), column(r.Runs, pod("period-120")),
			column(r.Runs, pod("period-critical-5")), column(r.Runs, pod("period-critical-120")),
			column(r.Runs, func(run Run) float64 { return run.LockReleased }),
			column(r.Runs, func(run Run) float64 { return run.PowerOff }),
			released, len(r.Runs), failedReady)
	}
	b.WriteString("\nPer priority group (signal -> the group's last pod stopped), and the node's Ready condition meanwhile:\n\n")
	b.WriteString("| agent | regular group | critical group | NotReady condition |\n|---|---|---|---|\n")
	for _, r := range results {
		reason := ""
		for _, run := range r.Runs {
			if reason == "" {
				reason = run.NotReadyReason
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.Agent,
			column(r.Runs, func(run Run) float64 { return groupDone(run, false) }),
			column(r.Runs, func(run Run) float64 { return groupDone(run, true) }), reason)
	}
	if !slices.ContainsFunc(results, func(r AgentResult) bool { return len(r.Cancels) > 0 }) {
		return b.String()
	}
	fmt.Fprintf(&b, "\nShutdowns cancelled (PrepareForShutdown(false)) %v after they began: seconds from the cancellation to the\n", CancelAfter)
	b.WriteString("node Ready again (median), and the pods stopped anyway (seen shut down within 30 s), per run:\n\n")
	b.WriteString("| agent | runs | Ready again after | pods stopped anyway |\n|---|---|---|---|\n")
	for _, r := range results {
		var ready []float64
		never := 0
		var stopped []string
		for _, c := range r.Cancels {
			if c.NodeReady >= 0 {
				ready = append(ready, c.NodeReady)
			} else {
				never++
			}
			list := strings.Join(c.Stopped, ", ")
			if list == "" {
				list = "none"
			}
			stopped = append(stopped, list)
		}
		col := secs(median(ready))
		if never > 0 {
			col += fmt.Sprintf(" (%d/%d never)", never, len(r.Cancels))
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", r.Agent, len(r.Cancels), col, strings.Join(stopped, "; "))
	}
	return b.String()
}
