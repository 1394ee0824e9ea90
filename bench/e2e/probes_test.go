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
	exec := `    livenessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
      timeoutSeconds: 5
`
	http := `    livenessProbe:
      httpGet: {path: /index.html, port: 8080}
      periodSeconds: 1
`
	// The load, and the same rate of probes without the runtime in
	// the way (http liveness): the difference is what 100 runc execs a
	// second cost containerd.
	b.Run("exec-liveness", func(b *testing.B) { probesBench(b, "bench-probes-exec", exec) })
	b.Run("http-liveness", func(b *testing.B) { probesBench(b, "bench-probes-http", http) })
}

func probesBench(b *testing.B, node, liveness string) {
	const pods = 100
	s := framework.RequireStack(b)
	n := framework.NewNodelet(b, s, node)
	n.AppendConfig("maxPods: 150\n")
	n.ExtraArgs = append(n.ExtraArgs, "-v", "4") // one line per probe run, to count them
	n.Start()
	for i := 0; i < pods; i++ {
		name := fmt.Sprintf("pr%03d", i)
		n.WriteManifest(name+".yaml", podManifest(name, "  terminationGracePeriodSeconds: 0\n",
			container("c", "mkdir -p /www; echo ok > /www/index.html; exec httpd -f -p 8080 -h /www")+liveness+`    readinessProbe:
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
	rt0 := runtimeCPUSeconds(b)
	busy0, total0 := machineCPU(b)
	cpu0, t0 := cpuSeconds(b, n.Pid()), time.Now()
	time.Sleep(60 * time.Second)
	cpu1, t1 := cpuSeconds(b, n.Pid()), time.Now()
	busy1, total1 := machineCPU(b)
	rt1 := runtimeCPUSeconds(b)
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
	b.ReportMetric(100*(rt1-rt0)/secs, "runtime-cpu-%core")
	b.ReportMetric(100*(busy1-busy0)/(total1-total0), "machine-busy-%")
	b.ReportMetric(float64(strings.Count(window, `"Probe ran"`))/secs, "probes/s")
	b.ReportMetric(float64(strings.Count(window, `"Probe failed"`)), "failed-probes/min")
	b.ReportMetric(float64(strings.Count(window, `"Probe ran late"`)), "late-probes/min")
	b.ReportMetric(float64(restarts), "max-restarts")
}

// runtimeCPUSeconds is the CPU time of containerd and its shims, including
// the runc processes they ran and reaped (cutime, cstime).
func runtimeCPUSeconds(b *testing.B) float64 {
	entries, _ := os.ReadDir("/proc")
	total := 0.0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		open, closeIdx := strings.IndexByte(string(data), '('), strings.LastIndexByte(string(data), ')')
		if open < 0 || closeIdx < 0 {
			continue
		}
		comm := string(data)[open+1 : closeIdx]
		if comm != "containerd" && !strings.HasPrefix(comm, "containerd-shim") {
			continue
		}
		f := strings.Fields(string(data)[closeIdx+2:])
		for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			v, _ := strconv.ParseFloat(f[i], 64)
			total += v / 100
		}
	}
	return total
}

// machineCPU returns the busy and total jiffies of all CPUs (/proc/stat).
func machineCPU(b *testing.B) (busy, total float64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])[1:]
	for i, v := range f {
		x, _ := strconv.ParseFloat(v, 64)
		total += x
		if i != 3 && i != 4 { // idle, iowait
			busy += x
		}
	}
	return busy, total
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
