package e2e

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// TestZPages: /flagz lists the command line's flags with their values and
// /statusz the binary's version and the paths served, through
// k8s.io/apiserver's handlers as upstream's kubelet (ComponentFlagz,
// ComponentStatusz, beta and on); /flagz is authorized as nodes/configz,
// /statusz as nodes/statusz, and a client allowed neither gets 403.
func TestZPages(t *testing.T) {
	const node = "zpages-node"
	c, n := clusterNode(t, node, "")
	admin := framework.APICredentials{CertName: "apiserver-kubelet-client"}
	// The zpages separate a key from its value with a delimiter and spacing
	// chosen at random (they are not meant to be parsed).
	code, flagz := c.KubeletAPI(t, n, admin, "/flagz")
	if code != http.StatusOK {
		t.Fatalf("GET /flagz: %d %s", code, flagz)
	}
	for _, re := range []string{`(?m)^kubelet flagz$`, `(?m)^hostname-override[:=\s]+` + node + `$`, `(?m)^root-dir[:=\s]+` + regexp.QuoteMeta(n.RootDir) + `$`} {
		if !regexp.MustCompile(re).MatchString(flagz) {
			t.Errorf("/flagz lacks %s:\n%s", re, flagz)
		}
	}
	code, statusz := c.KubeletAPI(t, n, admin, "/statusz")
	if code != http.StatusOK {
		t.Fatalf("GET /statusz: %d %s", code, statusz)
	}
	for _, re := range []string{`(?m)^kubelet statusz$`, `Binary version[:=\s]+1\.37\.2`, `Paths[:=\s]+.*/configz.*/flagz.*/statusz`} {
		if !regexp.MustCompile(re).MatchString(statusz) {
			t.Errorf("/statusz lacks %s:\n%s", re, statusz)
		}
	}
	ns := c.Namespace(t, "zpages")
	nobody := framework.APICredentials{Token: saToken(t, c, ns, "nobody")}
	for _, path := range []string{"/flagz", "/statusz"} {
		if code, body := c.KubeletAPI(t, n, nobody, path); code != http.StatusForbidden {
			t.Errorf("GET %s without RBAC: %d %s, want 403", path, code, body)
		}
	}
}
