package nodelet

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
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
			last := time.Unix(0, n.main.lastTurn.Load())
			if since := n.clock.Since(last); since > syncLoopUnhealthy {
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

// nodeIPs is --node-ip, or the first global unicast IPv4 address of an
// interface that is up.
func nodeIPs(flag string) []string {
	if flag != "" {
		return strings.Split(flag, ",")
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return []string{ipn.IP.String()}
			}
		}
	}
	return nil
}
