package eviction

import (
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
)

// state is what the eviction loop remembers between two observations, as
// upstream's manager: which thresholds were met (and since when), and when
// each pressure condition was last seen. Its update is a pure function of
// the previous state, the thresholds, what is observed and the time.
type state struct {
	// met: the thresholds met at the last update, grace periods passed.
	met []Threshold
	// firstMet: when each threshold met (grace period or not) was first
	// seen met, for soft thresholds' grace periods.
	firstMet map[string]time.Time // by thresholdKey
	// conditionSeen: when each pressure condition was last observed.
	conditionSeen map[v1.NodeConditionType]time.Time
}

// decision is what one update concludes.
type decision struct {
	// conditions are the node's pressure conditions: observed within the
	// pressure transition period.
	conditions []v1.NodeConditionType
	// act are the thresholds to reclaim for: met, grace periods passed,
	// most urgent first (memory before the others).
	act []Threshold
}

// update computes the next state and its decision. A threshold counts as
// met while its signal is below it, and, once met, until the signal is back
// above it by the minimum reclaim. Its condition holds as soon as it is
// met (soft or hard) and for transition after it was last seen; it is acted
// on once its grace period has passed.
func (s state) update(thresholds []Threshold, obs Observations, now time.Time, transition time.Duration) (state, decision) {
	var met []Threshold
	for _, t := range thresholds {
		if t.Met(obs, false) {
			met = append(met, t)
		}
	}
	for _, t := range s.met {
		if t.Met(obs, true) && !contains(met, t) {
			met = append(met, t)
		}
	}
	next := state{firstMet: map[string]time.Time{}, conditionSeen: map[v1.NodeConditionType]time.Time{}}
	for _, t := range met {
		at, ok := s.firstMet[thresholdKey(t)]
		if !ok {
			at = now
		}
		next.firstMet[thresholdKey(t)] = at
		next.conditionSeen[t.Signal.Condition()] = now
	}
	for c, at := range s.conditionSeen {
		if _, ok := next.conditionSeen[c]; !ok {
			next.conditionSeen[c] = at
		}
	}
	var d decision
	for c, at := range next.conditionSeen {
		if now.Sub(at) < transition {
			d.conditions = append(d.conditions, c)
		} else {
			delete(next.conditionSeen, c)
		}
	}
	sort.Slice(d.conditions, func(i, j int) bool { return d.conditions[i] < d.conditions[j] })
	for _, t := range met {
		if now.Sub(next.firstMet[thresholdKey(t)]) >= t.GracePeriod {
			d.act = append(d.act, t)
		}
	}
	sort.SliceStable(d.act, func(i, j int) bool { return urgency(d.act[i]) < urgency(d.act[j]) })
	next.met = d.act
	return next, d
}

// urgency orders thresholds as upstream: memory first, then the rest.
func urgency(t Threshold) int {
	if t.Signal.Resource() == v1.ResourceMemory {
		return 0
	}
	return 1
}

func contains(ts []Threshold, t Threshold) bool {
	for _, o := range ts {
		if thresholdKey(o) == thresholdKey(t) {
			return true
		}
	}
	return false
}

// thresholdKey tells thresholds apart: by signal, value and grace period
// (a signal may have a hard and a soft threshold).
func thresholdKey(t Threshold) string { return t.String() + "/" + t.GracePeriod.String() }
