package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Kubectl returns kubectl (the cluster's build) with the admin kubeconfig.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.Env["KUBECTL"], args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Env["KUBECONFIG"])
	return cmd
}

// KubectlOut runs kubectl and returns its combined output and error.
func (c *Cluster) KubectlOut(t testing.TB, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := c.Kubectl(ctx, args...).CombinedOutput()
	return string(out), err
}

// APICredentials is how a test talks to a nodelet's kubelet API: a bearer
// token, a client certificate of the cluster CA (by its file prefix in the
// PKI folder), or nothing.
type APICredentials struct {
	Token    string
	CertName string
}

// KubeletAPI sends a GET to the nodelet's kubelet API (HTTPS on its port)
// and returns the status code and body. The serving certificate is not
// verified (it is the node's; the API server's path verifies it).
func (c *Cluster) KubeletAPI(t testing.TB, n *Nodelet, creds APICredentials, path string) (int, string) {
	t.Helper()
	tlsCfg := &tls.Config{InsecureSkipVerify: true}
	if creds.CertName != "" {
		cert, err := tls.LoadX509KeyPair(filepath.Join(c.PKI, creds.CertName+".crt"), filepath.Join(c.PKI, creds.CertName+".key"))
		if err != nil {
			t.Fatal(err)
		}
		tlsCfg.Certificates = []tls.Certificate{cert}
	}
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", n.APIPort, path), nil)
	if err != nil {
		t.Fatal(err)
	}
	if creds.Token != "" {
		req.Header.Set("Authorization", "Bearer "+creds.Token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}
