package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

func httpGet(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestKubeletAPIStandaloneReadOnlyPortAndSelfSigned: without tlsCertFile a
// self-signed certificate is generated in <root-dir>/pki; anonymous
// requests get 401 on the secure port; the read-only port serves /pods
// without authentication and nothing else; with anonymous authentication
// and AlwaysAllow the secure port answers.
func TestKubeletAPIStandaloneReadOnlyPortAndSelfSigned(t *testing.T) {
	s := framework.RequireStack(t)
	n := framework.NewNodelet(t, s, "e2e-readonly")
	roPort := framework.FreePort(t)
	n.AppendConfig(fmt.Sprintf("readOnlyPort: %d\n", roPort))
	n.Start()
	n.WriteManifest("ro.yaml", podManifest("ro", "", container("c", "sleep 3600")))
	waitRunning(t, s, n.PodName("ro"), "c", 60*time.Second)

	insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	secure := fmt.Sprintf("https://127.0.0.1:%d", n.APIPort)
	var code int
	framework.Eventually(t, 10*time.Second, 100*time.Millisecond, func() bool {
		resp, err := insecure.Get(secure + "/pods")
		if err != nil {
			return false
		}
		resp.Body.Close()
		code = resp.StatusCode
		return true
	}, "kubelet API up")
	if code != http.StatusUnauthorized {
		t.Fatalf("anonymous GET /pods on the secure port: %d, want 401", code)
	}
	// The served certificate is the one generated in <root-dir>/pki.
	pemBytes, err := os.ReadFile(filepath.Join(n.RootDir, "pki", "kubelet.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pemBytes)
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", n.APIPort), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	served := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	if block == nil || string(served.Raw) != string(block.Bytes) {
		t.Fatal("the served certificate is not <root-dir>/pki/kubelet.crt")
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		t.Fatal(err)
	}

	plain := &http.Client{Timeout: 10 * time.Second}
	ro := fmt.Sprintf("http://127.0.0.1:%d", roPort)
	code, body := httpGet(t, plain, ro+"/pods")
	var list v1.PodList
	if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list.Items) != 1 ||
		list.Items[0].Name != n.PodName("ro") || list.Items[0].Status.Phase != v1.PodRunning {
		t.Fatalf("read-only /pods: %d %.300s", code, body)
	}
	if code, _ := httpGet(t, plain, ro+"/healthz"); code != http.StatusOK {
		t.Fatalf("read-only /healthz: %d", code)
	}
	for _, p := range []string{"/configz", "/runningpods/", "/containerLogs/default/" + n.PodName("ro") + "/c", "/debug/pprof/"} {
		if code, _ := httpGet(t, plain, ro+p); code != http.StatusNotFound {
			t.Errorf("read-only port serves %s: %d", p, code)
		}
	}

	// Anonymous and AlwaysAllow: the secure port answers everyone.
	n.Stop()
	n.AppendConfig("authentication:\n  anonymous:\n    enabled: true\nauthorization:\n  mode: AlwaysAllow\n")
	n.Start()
	framework.Eventually(t, 20*time.Second, 200*time.Millisecond, func() bool {
		resp, err := insecure.Get(secure + "/containerLogs/default/" + n.PodName("ro") + "/c")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "anonymous GET /containerLogs allowed")
	code, body = httpGet(t, insecure, secure+"/runningpods/")
	if code != http.StatusOK || !strings.Contains(body, n.PodName("ro")) {
		t.Fatalf("/runningpods/: %d %.300s", code, body)
	}
	// Debugging handlers: pprof and the node's log folder (/var/log).
	if code, body := httpGet(t, insecure, secure+"/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Fatalf("/debug/pprof/goroutine: %d %.200s", code, body)
	}
	entries, _ := os.ReadDir("/var/log")
	if len(entries) > 0 {
		if code, body := httpGet(t, insecure, secure+"/logs/"); code != http.StatusOK || !strings.Contains(body, entries[0].Name()) {
			t.Fatalf("/logs/: %d %.300s", code, body)
		}
	}
}

// TestContainerLogRotation: a container writing fast has its log rotated at
// containerLogMaxSize, at most containerLogMaxFiles files are kept, the
// older rotated ones gzip-compressed, through CRI ReopenContainerLog.
func TestContainerLogRotation(t *testing.T) {
	s := framework.RequireStack(t)
	n := framework.NewNodelet(t, s, "e2e-logrotate")
	const maxSize = 100 * 1024
	n.AppendConfig("containerLogMaxSize: 100Ki\ncontainerLogMaxFiles: 3\ncontainerLogMonitorInterval: 1s\n")
	n.Start()
	// About 50 KB/s: a rotation every two seconds or so.
	n.WriteManifest("w.yaml", podManifest("w", "", container("c", `while true; do head -c 5000 /dev/zero | tr '\0' x; echo; sleep 0.1; done`)))
	waitRunning(t, s, n.PodName("w"), "c", 60*time.Second)
	var dir string
	framework.Eventually(t, 10*time.Second, 100*time.Millisecond, func() bool {
		m, _ := filepath.Glob(filepath.Join(n.LogsDir, "default_"+n.PodName("w")+"_*", "c"))
		if len(m) == 1 {
			dir = m[0]
		}
		return dir != ""
	}, "log directory")
	maxSeen, sawGz := 0, false
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
			info, err := e.Info()
			if err != nil {
				continue // rotated or compressed meanwhile
			}
			// A file grows by what is written within one monitor interval
			// before it is rotated (as upstream): allow that much.
			if info.Size() > maxSize+80*1024 {
				t.Fatalf("%s is %d bytes (max %d + one interval)", e.Name(), info.Size(), maxSize)
			}
			sawGz = sawGz || strings.HasSuffix(e.Name(), ".gz")
		}
		finished := 0
		for _, nm := range names {
			if !strings.HasSuffix(nm, ".tmp") {
				finished++
			}
		}
		maxSeen = max(maxSeen, finished)
		if finished > 3 {
			sort.Strings(names)
			t.Fatalf("%d log files, want at most 3: %v", finished, names)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if maxSeen < 3 || !sawGz {
		t.Fatalf("rotation did not happen: at most %d files, compressed seen: %v", maxSeen, sawGz)
	}
	// The container kept writing into the reopened file.
	cur, err := os.Stat(filepath.Join(dir, "0.log"))
	if err != nil || cur.Size() == 0 {
		t.Fatalf("current log after rotation: %v", err)
	}
}
