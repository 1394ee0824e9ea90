package main

import (
	"strings"
	"testing"
	"time"
)

func TestReport(t *testing.T) {
	got := report([]Result{
		{Agent: "upstream", Runs: 3, Registered: 9.5, PodRunning: 1.2, Refusal: "UnexpectedAdmissionError", Reregistered: -1, Unhealthy: 10, PluginGone: 10, CapacityAfter: 2},
		{Agent: "nodelet", Registered: 0.1, PodRunning: 0.9, DeviceInPod: true, Refusal: "OutOfexample.com/resource", Reregistered: 0.5, Unhealthy: 0.1, PluginGone: 0.1, CapacityAfter: 2},
	}, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC))
	for _, want := range []string{
		"| | upstream | nodelet |",
		"| plugin start -> node allocatable 2 | 9.50 | 0.10 |",
		"| agent restart -> plugin registered again, allocatable 2 | not within the wait | 0.50 |",
		"| device's mount, node and env in the container | no | yes |",
		"`OutOfexample.com/resource`",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

func TestMedianOf(t *testing.T) {
	got := medianOf([]Result{
		{Registered: 3, PodRunning: -1, DeviceInPod: true},
		{Registered: 1, PodRunning: 2, DeviceInPod: false},
		{Registered: 2, PodRunning: -1, DeviceInPod: true},
	})
	if got.Runs != 3 || got.Registered != 2 || got.PodRunning != -1 || got.DeviceInPod {
		t.Fatalf("medianOf = %+v", got)
	}
}
