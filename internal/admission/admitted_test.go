package admission

import (
	"testing"
	"time"
)

func TestAdmitted(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	a := NewAdmitted()
	a.Add("active", t0)
	a.Add("waiting", t0)
	a.Add("old", t0.Add(-AdmittedGrace-time.Second))
	a.Add("released", t0)
	a.Forget("released")
	a.Sweep(map[string]map[string]bool{"active": {"c": true}}, t0)
	for uid, want := range map[string]bool{"active": false, "waiting": true, "old": false, "released": false} {
		if got := a.Has(uid); got != want {
			t.Errorf("%s: has %v, want %v", uid, got, want)
		}
	}
	a.Sweep(nil, t0.Add(AdmittedGrace+time.Second))
	if a.Has("waiting") {
		t.Error("a pod never seen active kept past the grace")
	}
}
