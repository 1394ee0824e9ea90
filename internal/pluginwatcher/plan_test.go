package pluginwatcher

import (
	"reflect"
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name  string
		found map[string]time.Time
		state map[string]*socketState
		want  actions
	}{
		{"new sockets registered, sorted", map[string]time.Time{"/r/b.sock": now, "/r/a.sock": now}, nil,
			actions{register: []string{"/r/a.sock", "/r/b.sock"}}},
		{"registered and present: nothing", map[string]time.Time{"/r/a.sock": now}, map[string]*socketState{"/r/a.sock": {registered: true, mtime: now}},
			actions{}},
		{"made anew: deregistered and registered again", map[string]time.Time{"/r/a.sock": now}, map[string]*socketState{"/r/a.sock": {registered: true, mtime: now.Add(-time.Minute)}},
			actions{register: []string{"/r/a.sock"}, deregister: []string{"/r/a.sock"}}},
		{"failed, back-off not over", map[string]time.Time{"/r/a.sock": now}, map[string]*socketState{"/r/a.sock": {failures: 1, next: now.Add(time.Second)}},
			actions{}},
		{"failed, back-off over: retried", map[string]time.Time{"/r/a.sock": now}, map[string]*socketState{"/r/a.sock": {failures: 3, next: now}},
			actions{register: []string{"/r/a.sock"}}},
		{"gone: deregistered, or forgotten when it never registered", nil,
			map[string]*socketState{"/r/a.sock": {registered: true}, "/r/b.sock": {failures: 1}},
			actions{deregister: []string{"/r/a.sock"}, forget: []string{"/r/b.sock"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := plan(tc.found, tc.state, now); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 8: 2 * time.Minute, 20: 2 * time.Minute} {
		if got := backoff(n); got != want {
			t.Errorf("backoff(%d) = %v, want %v", n, got, want)
		}
	}
}
