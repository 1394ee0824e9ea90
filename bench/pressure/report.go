package main

import (
	"fmt"
	"strings"
)

// stats are one agent's figures for one signal.
type stats struct {
	runs, evicted, oomRuns, limitRuns int
	oomKills                          int64
	toCondition, toEvict              float64 // medians, -1: none
	minEvict, maxEvict                float64
}

func summarize(r *AgentResult, signal string) stats {
	s := stats{minEvict: -1, maxEvict: -1}
	var conds, evicts []float64
	for _, run := range r.Runs {
		if run.Signal != signal {
			continue
		}
		s.runs++
		s.oomKills += run.OOMKills
		if run.OOMKills > 0 {
			s.oomRuns++
		}
		if run.LimitHits > 0 {
			s.limitRuns++
		}
		if run.Outcome == "evicted" {
			s.evicted++
		}
		conds = append(conds, run.ToCondition)
		if run.ToEviction >= 0 {
			evicts = append(evicts, run.ToEviction)
			if s.minEvict < 0 || run.ToEviction < s.minEvict {
				s.minEvict = run.ToEviction
			}
			s.maxEvict = max(s.maxEvict, run.ToEviction)
		}
	}
	s.toCondition, s.toEvict = median(conds), median(evicts)
	return s
}

func secs(v float64) string {
	if v < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f", v)
}

// section is the Markdown of the results: one table, a column per agent.
func section(res *Results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Node pressure, side by side (bench/pressure)\n\n")
	fmt.Fprintf(&b, "Written by `go run ./bench/pressure` on %s (%s). Each agent runs as node bench-pressure with the same\n", res.Date, res.Machine)
	b.WriteString("KubeletConfiguration: `cgroupRoot: /bench-pressure`, `systemReserved` leaving the pods' cgroup 1 GiB, `evictionHard`\n")
	b.WriteString("memory.available 300Mi (so allocatableMemory.available 300Mi on the pods' cgroup), nodefs.available 200Mi and\n")
	b.WriteString("nodefs.inodesFree 2000 on its root directory (a 512 MiB ext4 loop mount with 6000 inodes), pid.available 300 below\n")
	b.WriteString("the machine's tasks at start, `evictionPressureTransitionPeriod: 10s`, the default 10 s `evictionMonitoringPeriod`.\n")
	b.WriteString("Times run from the moment the benchmark's own sampler (every 20 ms, reading what the agents read) saw the signal past\n")
	b.WriteString("its threshold to the moment the API showed the node's condition True and the pod Failed with reason Evicted.\n\n")
	var agents []string
	for _, a := range res.Agents {
		agents = append(agents, a.Agent)
	}
	fmt.Fprintf(&b, "| signal | figure | %s |\n|---|---|%s\n", strings.Join(agents, " | "), strings.Repeat("---|", len(agents)))
	row := func(signal, figure string, f func(stats) string) {
		cells := make([]string, 0, len(res.Agents))
		for _, a := range res.Agents {
			cells = append(cells, f(summarize(a, signal)))
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", signal, figure, strings.Join(cells, " | "))
	}
	row("memory", "hog evicted before the pods' cgroup reached its limit (runs)", func(s stats) string { return fmt.Sprintf("%d of %d", s.evicted, s.runs) })
	row("memory", "runs with an OOM kill (kills in all)", func(s stats) string {
		return fmt.Sprintf("%d of %d (%d)", s.oomRuns, s.runs, s.oomKills)
	})
	row("memory", "runs where the pods' cgroup hit its limit (memory.failcnt)", func(s stats) string { return fmt.Sprintf("%d of %d", s.limitRuns, s.runs) })
	for _, sig := range []struct{ signal, cond string }{{"memory", "MemoryPressure"}, {"disk", "DiskPressure"}, {"inodes", "DiskPressure"}, {"pids", "PIDPressure"}} {
		if sig.signal != "memory" {
			row(sig.signal, "pod evicted (runs)", func(s stats) string { return fmt.Sprintf("%d of %d", s.evicted, s.runs) })
		}
		row(sig.signal, "threshold crossed -> "+sig.cond+" True, median (s)", func(s stats) string { return secs(s.toCondition) })
		row(sig.signal, "threshold crossed -> pod evicted, median (min-max) (s)", func(s stats) string {
			if s.toEvict < 0 {
				return "never"
			}
			return fmt.Sprintf("%s (%s-%s)", secs(s.toEvict), secs(s.minEvict), secs(s.maxEvict))
		})
	}
	b.WriteString("\nThe memory hog is BestEffort and grows ~75 MiB/s (busybox `tail` holding a line that never ends, fed 10 MiB\n")
	b.WriteString("every 0.1 s): from the threshold (724 MiB in the pods' cgroup) to the cgroup's limit (1 GiB) it has about 4 s,\n")
	b.WriteString("so an agent that looks every 10 s often finds it OOM-killed by the kernel instead (kubernetes#31362); nodelet\n")
	b.WriteString("arms a memory threshold on that cgroup (`cgroup.event_control`) and observes as soon as the kernel signals the\n")
	b.WriteString("crossing. The disk pod writes 20 MiB/s into an emptyDir, the inode pod creates 500 empty files a second, the\n")
	b.WriteString("PID pod forks 100 sleeps a second. Raw runs: `bench/results/pressure.json`.\n")
	return b.String()
}
