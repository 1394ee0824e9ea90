package main

import (
	"fmt"
	"strings"
	"time"
)

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func report(results []Result, now time.Time) string {
	var b strings.Builder
	b.WriteString("## Offline autonomy, side by side (bench/offline)\n\n")
	fmt.Fprintf(&b, "Written by `go run ./bench/offline` on %s. Each agent joins as node bench-offline and runs three API pods\n", now.UTC().Format("2006-01-02"))
	b.WriteString("with a ConfigMap volume and env and the token volume: steady, crasher (exits after 8 s) and doomed.\n")
	b.WriteString("**Restart**: the agent is killed, doomed deleted and fresh created meanwhile, the API server killed, the agent\n")
	b.WriteString("started again and watched for 30 s. **Reboot**: the agent stopped, containerd emptied of the pods, their tmpfs\n")
	b.WriteString("volumes unmounted, the agent started again without the API server and watched for 45 s. **API back**: the API\n")
	b.WriteString("server started; converged = doomed stopped, steady and fresh Running in the API with their running containers,\n")
	b.WriteString("the crasher's restarts written, one ready sandbox per pod (time from the API server's first answer).\n\n")
	b.WriteString("| agent | restart: steady keeps its container | restart: crasher restarted offline | restart: doomed kept | reboot: pods running again | reboot: start -> all running | API back: converged | most ready sandboxes per pod |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		running := "none"
		if len(r.RebootRunning) > 0 {
			running = strings.Join(r.RebootRunning, ", ")
		}
		all := "not within 45 s"
		if r.RebootAllRunning > 0 {
			all = fmt.Sprintf("%.1f s", r.RebootAllRunning)
		}
		conv := "not within 2 min: " + r.NotConverged
		if r.Converged >= 0 {
			conv = fmt.Sprintf("%.1f s", r.Converged)
		}
		fmt.Fprintf(&b, "| %s | %s | %d times | %s | %s | %s | %s | %d |\n", r.Agent, yesNo(r.SteadyKept), r.CrasherRestarts,
			yesNo(r.DoomedRunning), running, all, conv, r.MaxReadySandbox)
	}
	return b.String()
}
