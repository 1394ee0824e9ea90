package pluginwatcher

import (
	"sort"
	"time"
)

// Backoff of a registration that failed: first retry after Initial,
// doubling up to Max.
const (
	BackoffInitial = time.Second
	BackoffMax     = 2 * time.Minute
)

// socketState is what the manager knows of one socket path.
type socketState struct {
	// registered: the handler accepted it, as plugin name of type kind.
	registered bool
	name, kind string
	// mtime is the socket file's when it was registered: a plugin that
	// restarted made a new one.
	mtime time.Time
	// failures since the last success, and when the next try is due.
	failures int
	next     time.Time
}

// actions are what a reconciliation does.
type actions struct {
	// register: sockets to (re)try now; deregister: registered sockets
	// whose file is gone; forget: failed sockets whose file is gone.
	register, deregister, forget []string
}

// plan compares the sockets found (path -> modification time) with the
// state: new sockets are registered at once, failed ones when their
// back-off is over; registered ones whose socket is gone are deregistered,
// and those whose socket was made anew (the plugin restarted) deregistered
// and registered again.
func plan(found map[string]time.Time, state map[string]*socketState, now time.Time) actions {
	var a actions
	for p, mtime := range found {
		st, ok := state[p]
		switch {
		case !ok:
			a.register = append(a.register, p)
		case st.registered && !st.mtime.Equal(mtime):
			a.deregister = append(a.deregister, p)
			a.register = append(a.register, p)
		case !st.registered && !now.Before(st.next):
			a.register = append(a.register, p)
		}
	}
	for p, st := range state {
		if _, ok := found[p]; ok {
			continue
		}
		if st.registered {
			a.deregister = append(a.deregister, p)
		} else {
			a.forget = append(a.forget, p)
		}
	}
	sort.Strings(a.register)
	sort.Strings(a.deregister)
	sort.Strings(a.forget)
	return a
}

// backoff is the wait after the n-th failure in a row (n >= 1).
func backoff(n int) time.Duration {
	d := BackoffInitial
	for i := 1; i < n && d < BackoffMax; i++ {
		d *= 2
	}
	return min(d, BackoffMax)
}
