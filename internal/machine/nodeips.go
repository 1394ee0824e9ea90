package machine

import (
	"net"
	"strings"
)

// NodeIPs are the node's IPs: --node-ip (comma-separated) when given, else
// the first global unicast IPv4 address of an interface that is up.
func NodeIPs(flag string) []string {
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

// NodeIPSpecified: --node-ip names an address (not empty, not 0.0.0.0 or
// ::), as upstream's nodeIPSpecified.
func NodeIPSpecified(flag string) bool {
	for _, ip := range strings.Split(flag, ",") {
		if a := net.ParseIP(strings.TrimSpace(ip)); a != nil && !a.IsUnspecified() {
			return true
		}
	}
	return false
}
