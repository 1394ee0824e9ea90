package podcertificate

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// The whole flow through Run (upstream's TestFullFlow), in a synctest
// bubble with the fake clientset: the informer's goroutines, the work
// queue's and the refresh pass's timers are the bubble's, so
// synctest.Wait tells when the manager has done all it will, and sleeping
// is instant.
func TestRunFullFlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(testServiceAccount())
		nameRequests(client, clock.RealClock{})
		pod := certPod("workload", "workload-uid", "ED25519")
		pods := newFakePods(pod)
		m, err := New(Config{Client: client, NodeName: testNode, Node: testNodeObject, Pods: pods, Recorder: record.NewFakeRecorder(100)})
		if err != nil {
			t.Fatal(err)
		}
		m.jitter = func() time.Duration { return 0 }
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
			synctest.Wait() // the informer's goroutines end too
		})
		time.Sleep(time.Second) // the informer syncs (polled every 100ms)
		synctest.Wait()         // and watches
		if err := m.Run(ctx); err == nil || !strings.Contains(err.Error(), "twice") {
			t.Errorf("second Run: %v", err)
		}

		ca := newTestCA(t)
		requests := func() []certificatesv1.PodCertificateRequest {
			t.Helper()
			l, err := client.CertificatesV1().PodCertificateRequests("ns1").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return l.Items
		}
		// issue signs the pending request, as a signer would.
		issue := func() string {
			t.Helper()
			for _, pcr := range requests() {
				if len(pcr.Status.Conditions) > 0 {
					continue
				}
				chain := ca.issue(t, &pcr, time.Now())
				if _, err := client.CertificatesV1().PodCertificateRequests("ns1").UpdateStatus(ctx, &pcr, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				return chain
			}
			t.Fatal("no pending request")
			return ""
		}
		bundle := func() ([]byte, []byte, error) {
			return m.GetPodCertificateCredentialBundle(ctx, "ns1", "workload", "workload-uid", "certificate", 1)
		}

		m.TrackPod(ctx, pod)
		synctest.Wait()
		if n := len(requests()); n != 1 {
			t.Fatalf("%d requests after TrackPod, want 1", n)
		}
		if _, _, err := bundle(); err == nil || err.Error() != "credential bundle is not issued yet" {
			t.Fatalf("bundle before issuance: %v", err)
		}
		chain1 := issue()
		key1, got, err := bundle()
		if err != nil || string(got) != chain1 {
			t.Fatalf("bundle after issuance: %q, %v", got, err)
		}
		checkKeyMatches(t, key1, got)

		// Up to beginRefreshAt (23 hours), refresh passes change nothing;
		// the pass after it (1 to 2 minutes) creates a refresh request.
		time.Sleep(23*time.Hour - time.Second)
		synctest.Wait()
		if n := len(requests()); n != 1 {
			t.Fatalf("%d requests before beginRefreshAt", n)
		}
		time.Sleep(2*time.Minute + time.Second)
		synctest.Wait()
		if n := len(requests()); n != 2 {
			t.Fatalf("%d requests after beginRefreshAt, want 2", n)
		}
		if _, got, err := bundle(); err != nil || string(got) != chain1 {
			t.Fatalf("bundle while refreshing: %q, %v", got, err)
		}
		chain2 := issue()
		key2, got, err := bundle()
		if err != nil || string(got) != chain2 {
			t.Fatalf("bundle after refresh: %q, %v", got, err)
		}
		checkKeyMatches(t, key2, got)

		// The pod goes: the next refresh pass forgets it.
		pods.remove(pod.UID)
		time.Sleep(2*time.Minute + time.Second)
		synctest.Wait()
		if _, _, err := bundle(); err == nil || !strings.HasPrefix(err.Error(), "no credentials yet for key=") {
			t.Fatalf("bundle of a pod gone: %v", err)
		}
	})
}
