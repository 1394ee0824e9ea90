package admission

import "time"

// AdmittedGrace is how long a resource manager keeps what it gave a pod at
// admission before it sees the pod among the active pods.
const AdmittedGrace = time.Minute

// Admitted are the pods a resource manager (CPU, memory) gave resources
// at admission and has not seen among the active pods yet: a pod joins
// them only after the whole admission chain admitted it, so a sweep of
// stale assignments in between must not take its resources back. Not
// safe for concurrent use: the manager's lock guards it.
type Admitted struct {
	at map[string]time.Time
}

// NewAdmitted returns an empty set.
func NewAdmitted() *Admitted { return &Admitted{at: map[string]time.Time{}} }

// Add records the pod admitted at now.
func (a *Admitted) Add(uid string, now time.Time) { a.at[uid] = now }

// Forget drops the pod (active, released or gone).
func (a *Admitted) Forget(uid string) { delete(a.at, uid) }

// Has reports whether the pod is admitted and not yet active.
func (a *Admitted) Has(uid string) bool {
	_, ok := a.at[uid]
	return ok
}

// Sweep forgets the pods that are active now (in live, by UID) or were
// admitted more than AdmittedGrace before now.
func (a *Admitted) Sweep(live map[string]map[string]bool, now time.Time) {
	for uid, at := range a.at {
		if live[uid] != nil || now.Sub(at) > AdmittedGrace {
			delete(a.at, uid)
		}
	}
}
