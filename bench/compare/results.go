package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Results is everything one run measured (bench/results/compare.json).
type Results struct {
	Date    string            `json:"date"`
	Machine map[string]string `json:"machine"`
	Config  map[string]any    `json:"config"`
	Agents  []*AgentResult    `json:"agents"`
	Floor   []*Floor          `json:"floor,omitempty"`
	// DeletionFloor: the deletion scenario's pods stopped by the runtime
	// alone, every pod at once and one after the other.
	DeletionFloor []*DeletionFloor `json:"deletionFloor,omitempty"`
	// APIFloor: the control plane's own work for a direct burst's creates,
	// with no agent.
	APIFloor []*APIFloor `json:"apiFloor,omitempty"`
}

// AgentResult is one agent's figures; slices hold one entry per repetition.
type AgentResult struct {
	Agent              string      `json:"agent"`
	Version            string      `json:"version"`
	NodeReadySeconds   float64     `json:"nodeReadySeconds"`
	Idle               []Footprint `json:"idle"`
	Bursts             []*Burst    `json:"bursts"`
	DirectBursts       []*Burst    `json:"directBursts,omitempty"` // spec.nodeName set, no scheduler
	RestartSeconds     []float64   `json:"restartSeconds"`
	DeleteGrace0       []Deletion  `json:"deleteGrace0"`
	DeleteDefaultGrace []Deletion  `json:"deleteDefaultGrace"`
	Scale              []*Burst    `json:"scale"`
	ScaleErrors        []string    `json:"scaleErrors,omitempty"`
	Profile            string      `json:"profile,omitempty"`
}

// Deletion is one deletion of pods at once: until the last is gone from the
// API, and until no sandbox of them is ready in containerd.
type Deletion struct {
	GoneSeconds    float64 `json:"goneSeconds"`
	StoppedSeconds float64 `json:"stoppedSeconds"`
	// PodStopped: each pod from the delete call to its sandbox not ready.
	PodStopped Stats `json:"podStoppedMs"`
}

// Footprint is the agent process's RSS and CPU over a window.
type Footprint struct {
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpuSeconds"`
	CPUPercent float64 `json:"cpuPercentOfOneCore"`
	RSSMeanMiB float64 `json:"rssMeanMiB"`
	RSSMaxMiB  float64 `json:"rssMaxMiB"`
	RSSEndMiB  float64 `json:"rssEndMiB"`
	// The mean RSS split: anonymous memory (heap, stacks, the runtime's
	// own) and mapped file pages (the binary's code and data, libraries).
	AnonMeanMiB float64 `json:"rssAnonMeanMiB,omitempty"`
	FileMeanMiB float64 `json:"rssFileMeanMiB,omitempty"`
}

// Burst is one startup burst of Pods pods created at once.
type Burst struct {
	Pods              int                `json:"pods"`
	Direct            bool               `json:"direct,omitempty"`
	CreateSeconds     float64            `json:"createSeconds"`
	Running           Stats              `json:"running"`
	Ready             Stats              `json:"ready"`
	AllRunningSeconds float64            `json:"allRunningSeconds"`
	Footprint         Footprint          `json:"footprint"`
	Steady            Footprint          `json:"steady"`
	OtherCPUSeconds   map[string]float64 `json:"otherCpuSeconds"`
	Breakdown         map[string]float64 `json:"breakdownMedianMs"`
	RunningMs         []float64          `json:"runningMs"`
	ReadyMs           []float64          `json:"readyMs"`
	RSSCurve          [][2]float64       `json:"rssCurve,omitempty"`
	// API: the agent's requests during the burst by class (audit.go).
	API map[string]float64 `json:"api,omitempty"`
	// CRI: the CRI calls containerd answered during the burst (the same
	// window as API), by method (cri.go).
	CRI map[string]float64 `json:"cri,omitempty"`
}

// Stats of latencies in ms.
type Stats struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// stats of sorted values (nearest rank).
func stats(x []float64) Stats {
	if len(x) == 0 {
		return Stats{}
	}
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(x)))) - 1
		return x[max(0, min(i, len(x)-1))]
	}
	return Stats{P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: x[len(x)-1]}
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	y := append([]float64(nil), x...)
	sort.Float64s(y)
	if len(y)%2 == 1 {
		return y[len(y)/2]
	}
	return (y[len(y)/2-1] + y[len(y)/2]) / 2
}

func (h *harness) machineFacts() *Results {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	cpu := "unknown"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "model name") {
				cpu = strings.TrimSpace(line[strings.Index(line, ":")+1:])
				break
			}
		}
	}
	mem := "unknown"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.SplitN(string(data), "\n", 2)[0], "MemTotal: %d kB", &kb)
		mem = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
	}
	osr := "unknown"
	if data, err := os.ReadFile("/etc/debian_version"); err == nil {
		osr = "Debian " + strings.TrimSpace(string(data))
	}
	cgroup := "v1 (hybrid)"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		cgroup = "v2"
	}
	return &Results{
		Date: time.Now().UTC().Format(time.RFC3339),
		Machine: map[string]string{
			"cpus":       fmt.Sprint(runtime.NumCPU()),
			"cpu":        cpu,
			"memory":     mem,
			"os":         osr,
			"kernel":     strings.TrimSpace(string(kernel)),
			"cgroup":     cgroup,
			"containerd": strings.TrimSpace(mustRun(envOr(h.env, "CONTAINERD", "containerd"), "--version")),
			"runc":       strings.SplitN(mustRun(envOr(h.env, "RUNC", "runc"), "--version"), "\n", 2)[0],
			"go":         runtime.Version(),
			"control":    strings.TrimSpace(mustRun(filepath.Join(h.env["K8S_BIN"], "kube-apiserver"), "--version")),
		},
		Config: map[string]any{
			"reps": h.o.reps, "burstPods": h.o.burst, "direct": h.o.direct, "deletePods": h.o.delPods,
			"scale": h.o.scale, "windowSeconds": h.o.window.Seconds(), "node": h.o.Node,
			"kubeletConfiguration": h.config("$DIR"),
		},
	}
}

// envOr is env[key], else def.
func envOr(env map[string]string, key, def string) string {
	if v := env[key]; v != "" {
		return v
	}
	return def
}

func saveResults(path string, r *Results) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func loadResults(path string) (*Results, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	return &r, json.Unmarshal(data, &r)
}
