package machine

import (
	"net"
	"slices"
	"testing"
)

func TestNodeIPs(t *testing.T) {
	if got := NodeIPs("10.0.0.1,fd00::1"); !slices.Equal(got, []string{"10.0.0.1", "fd00::1"}) {
		t.Errorf("the flag: %v", got)
	}
	for _, ip := range NodeIPs("") {
		if p := net.ParseIP(ip); p == nil || p.To4() == nil || !p.IsGlobalUnicast() {
			t.Errorf("found %q: not a global unicast IPv4 address", ip)
		}
	}
}

func TestNodeIPSpecified(t *testing.T) {
	for flag, want := range map[string]bool{"": false, "0.0.0.0": false, "::": false, "10.0.0.5": true, "10.0.0.5,fd00::5": true, "bogus": false} {
		if got := NodeIPSpecified(flag); got != want {
			t.Errorf("NodeIPSpecified(%q) = %v, want %v", flag, got, want)
		}
	}
}
