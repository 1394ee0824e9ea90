package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// manifestServer is the manifest URL: it answers with its current status
// and body and keeps the last request's headers.
type manifestServer struct {
	mu     sync.Mutex
	status int
	body   string
	header http.Header
	gets   int
}

func (m *manifestServer) set(status int, body string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.status, m.body = status, body
}

func (m *manifestServer) last() (http.Header, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.header, m.gets
}

func (m *manifestServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.header, m.gets = r.Header.Clone(), m.gets+1
	w.WriteHeader(m.status)
	_, _ = w.Write([]byte(m.body))
}

// TestClusterStaticPodsFromURL: staticPodURL with staticPodURLHeader and
// httpCheckFrequency, as upstream's "http" source. The URL's pod runs and
// is mirrored (config.source http); a failing URL keeps it; a changed
// answer replaces it; an empty answer removes it and its mirror pod.
func TestClusterStaticPodsFromURL(t *testing.T) {
	name := "e2e-podurl"
	c := framework.RequireCluster(t)
	srv := &manifestServer{status: http.StatusOK,
		body: podManifest("fromurl", "  terminationGracePeriodSeconds: 2\n", container("c", "echo v1; sleep 3600"))}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	n := framework.NewClusterNodelet(t, c, name)
	n.AppendConfig("staticPodURL: " + ts.URL + "/pods\nhttpCheckFrequency: 2s\nstaticPodURLHeader:\n  Authorization: [\"Bearer e2e\"]\n  X-Node: [a, b]\n")
	n.Start()
	pod := n.PodName("fromurl")
	ctx := context.Background()

	mp := waitPod(t, c, "default", pod, 90*time.Second, "mirror pod Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if mp.Annotations["kubernetes.io/config.source"] != "http" || mp.Annotations["kubernetes.io/config.mirror"] != mp.Annotations["kubernetes.io/config.hash"] {
		t.Errorf("mirror pod annotations %v, want source http and the mirror's hash", mp.Annotations)
	}
	for _, tol := range mp.Spec.Tolerations {
		if tol.Key == "" && tol.Operator == v1.TolerationOpExists && tol.Effect == v1.TaintEffectNoExecute {
			t.Errorf("a URL pod got the file pods' NoExecute toleration: %v", mp.Spec.Tolerations)
		}
	}
	h, _ := srv.last()
	if h.Get("Authorization") != "Bearer e2e" || len(h.Values("X-Node")) != 2 || h.Values("X-Node")[1] != "b" {
		t.Errorf("the GET's headers %v, want staticPodURLHeader's", h)
	}
	ctr := waitRunning(t, c.Stack, pod, "c", 30*time.Second)

	// The URL fails for three periods: the pod keeps running as it was.
	srv.set(http.StatusInternalServerError, "down")
	_, before := srv.last()
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		_, gets := srv.last()
		return gets >= before+3
	}, "three GETs answered 500")
	if now := c.RunningContainer(t, pod, "c"); now == nil || now.Id != ctr.Id {
		t.Fatalf("the pod's container changed while the URL failed")
	}

	// A changed answer replaces the pod.
	srv.set(http.StatusOK, podManifest("fromurl", "  terminationGracePeriodSeconds: 2\n", container("c", "echo v2; sleep 3600")))
	waitPod(t, c, "default", pod, 90*time.Second, "mirror pod of the new answer Running", func(p *v1.Pod) bool {
		return p.Annotations["kubernetes.io/config.hash"] != mp.Annotations["kubernetes.io/config.hash"] && p.Status.Phase == v1.PodRunning
	})
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		now := c.RunningContainer(t, pod, "c")
		return now != nil && now.Id != ctr.Id && len(c.Sandboxes(t, pod)) == 1
	}, "the new answer's container replacing the old one")

	// An empty answer removes the pod and its mirror pod.
	srv.set(http.StatusOK, "")
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		_, err := c.Client.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		return apierrors.IsNotFound(err) && len(c.Sandboxes(t, pod)) == 0
	}, "the pod and its mirror pod gone after an empty answer")
}
