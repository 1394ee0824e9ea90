package nodelet

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nodelet/nodelet/internal/healthz"
)

// syncLoopUnhealthy: healthz fails when the main loop has not turned for
// this long.
const syncLoopUnhealthy = 2 * time.Minute

// healthHandler is /healthz: the runtime reached and answering, the PLEG
// relisting, the main loop turning; the offline state in ?verbose.
func (n *Nodelet) healthHandler() http.Handler {
	return healthz.Handler(
		healthz.Check{Name: "ping", Fn: func() error { return nil }},
		healthz.Check{Name: "runtime", Fn: func() error {
			if !n.connected.IsReady() {
				return errors.New("not connected to the container runtime")
			}
			if err := n.pleg.RuntimeError(); err != nil {
				return fmt.Errorf("container runtime not answering: %w", err)
			}
			return nil
		}},
		healthz.Check{Name: "pleg", Fn: func() error {
			if !n.connected.IsReady() {
				return nil // reported by the runtime check
			}
			return n.pleg.Healthy()
		}},
		healthz.Check{Name: "offline", Fn: func() error { return nil }, Info: n.offlineInfo},
		healthz.Check{Name: "syncloop", Fn: func() error {
			if !n.connected.IsReady() {
				return nil // the main loop is built once the runtime answers
			}
			if since := n.clock.Since(n.main.LastTurn()); since > syncLoopUnhealthy {
				return fmt.Errorf("sync loop last turned %v ago", since.Round(time.Second))
			}
			return nil
		}},
	)
}

// offlineInfo is the offline state for /healthz?verbose.
func (n *Nodelet) offlineInfo() string {
	switch {
	case n.offline != nil:
		return n.offline.State().Describe(n.clock.Now())
	case n.client == nil:
		return "standalone"
	}
	return "offline autonomy off"
}
