package main

import (
	"strings"
	"testing"
	"time"
)

func TestCountRequests(t *testing.T) {
	line := func(user, verb, res, sub, at string) string {
		return `{"kind":"Event","verb":"` + verb + `","user":{"username":"` + user + `"},"objectRef":{"resource":"` + res + `","subresource":"` + sub + `"},"requestReceivedTimestamp":"` + at + `"}`
	}
	log := strings.Join([]string{
		line("system:node:n", "patch", "pods", "status", "2026-12-03T06:00:01.5Z"),
		line("system:node:n", "patch", "pods", "status", "2026-12-03T06:00:02Z"),
		line("system:node:n", "create", "events", "", "2026-12-03T06:00:02Z"),
		line("system:node:n", "patch", "events", "", "2026-12-03T06:00:02Z"),
		line("system:node:n", "create", "serviceaccounts", "token", "2026-12-03T06:00:02Z"),
		line("system:node:n", "get", "configmaps", "", "2026-12-03T06:00:02Z"),
		line("system:node:n", "update", "leases", "", "2026-12-03T06:00:03Z"),
		line("system:node:other", "patch", "pods", "status", "2026-12-03T06:00:02Z"),
		line("system:node:n", "patch", "pods", "status", "2026-12-03T06:00:09Z"), // after the window
		"not json",
	}, "\n")
	from := time.Date(2026, 12, 3, 6, 0, 1, 0, time.UTC)
	got := countRequests(strings.NewReader(log), "system:node:n", from, from.Add(5*time.Second))
	want := map[string]float64{
		apiStatusPatches: 2, apiEvents: 2, apiTokens: 1, apiReads: 1,
		apiOtherWrites: 1, apiOtherWrites + ":leases:update": 1, apiWrites: 6, apiAll: 7,
	}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
