package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// BenchmarkProbes100Pods runs 100 static pods, each with an exec liveness
// probe and an http readiness probe every second, and reports nodelet's CPU
// (percent of one core) over 60 s of steady state, the probe failures seen
// (every probe should pass) and the container restarts (there should be
// none).
func BenchmarkProbes100Pods(b *testing.B) {
	const pods = 100
	s := framework.RequireStack(b)
	n := framework.NewNodelet(b, s, "bench-probes")
	n.AppendConfig("maxPods: 150\n")
	n.ExtraArgs = append(n.ExtraArgs, "-v", "4") // one line per probe run, to count them
	n.Start()
	for i := 0; i < pods; i++ {
		name := fmt.Sprintf("pr%03d", i)
		n.WriteManifest(name+".yaml", podManifest(name, "  terminationGracePeriodSeconds: 0\n",
			container("c", "mkdir -p /www; echo ok > /www/index.html; exec httpd -f -p 8080 -h /www")+`    livenessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
      timeoutSeconds: 5
    readinessProbe:
      httpGet: {path: /index.html, port: 8080}
      periodSeconds: 1
`))
	}
	for i := 0; i < pods; i++ {
		waitRunningB(b, s, n.PodName(fmt.Sprintf("pr%03d", i)), "c")
	}
	time.Sleep(20 * time.Second) // settle
	logBefore := n.Log()
	b.ResetTimer()
	cpu0, t0 := cpuSeconds(b, n.Pid()), time.Now()
	time.Sleep(60 * time.Second)
	cpu1, t1 := cpuSeconds(b, n.Pid()), time.Now()
	b.StopTimer()
	restarts := 0
	for i := 0; i < pods; i++ {
		for _, c := range s.Containers(b, n.PodName(fmt.Sprintf("pr%03d", i)), "c") {
			if a := int(c.GetMetadata().GetAttempt()); a > restarts {
				restarts = a
			}
		}
	}
	window := n.Log()[len(logBefore):]
	secs := t1.Sub(t0).Seconds()
	b.ReportMetric(100*(cpu1-cpu0)/secs, "cpu-%core")
	b.ReportMetric(float64(strings.Count(window, `"Probe ran"`))/secs, "probes/s")
	b.ReportMetric(float64(strings.Count(window, `"Probe failed"`)), "failed-probes/min")
	b.ReportMetric(float64(strings.Count(window, `"Probe ran late"`)), "late-probes/min")
	b.ReportMetric(float64(restarts), "max-restarts")
}

// cpuSeconds is a process's user+system CPU time.
func cpuSeconds(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name in parentheses; utime and stime are
	// fields 14 and 15 (1-based) of the whole line.
	rest := string(data)[strings.LastIndexByte(string(data), ')')+2:]
	f := strings.Fields(rest)
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}
