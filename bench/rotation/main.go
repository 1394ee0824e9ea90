// Command rotation runs the certificate rotation scenario side by side:
// nodelet and the upstream kubelet, in turn, join the stack's control plane
// as node bench-rotation with the bootstrap token alone
// (--bootstrap-kubeconfig, rotateCertificates and serverTLSBootstrap: true,
// the same KubeletConfiguration otherwise); the serving CSRs are approved
// by this program (never automatically upstream). The control plane signs
// certificates for $CLUSTER_SIGNING_DURATION (3 minutes), so both
// certificates are renewed within the run while a pod runs. Every 2 s it
// checks the Node's Ready condition and the certificates' serial numbers
// in the agent's cert dir, and every 10 s reads the pod's log through the
// API server (which reaches the agent through its serving certificate).
// It writes the runs as JSON and a Markdown section.
//
//	go run ./bench/rotation -doc docs/benchmarks.md
//
// Run as root from the repository root with the stack and the control plane
// up (hack/bench.sh does both). About 3 minutes per agent.
package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/bench/internal/benchkit"
	nodeagent "github.com/nodelet/nodelet/test/agent"
	"github.com/nodelet/nodelet/test/e2e/framework"
)

const namespace = "bench-rotation"

// Rotation is one certificate's renewal (seconds since the agent started).
type Rotation struct {
	OldSerial string  `json:"oldSerial"`
	NewSerial string  `json:"newSerial"`
	At        float64 `json:"at"`
	// Fraction is when it happened, as a fraction of the old
	// certificate's lifetime.
	Fraction float64 `json:"fraction"`
}

// Result is one agent's run.
type Result struct {
	Agent string `json:"agent"`
	// Signing is the control plane's --cluster-signing-duration.
	Signing       string    `json:"signing"`
	ToReady       float64   `json:"toReady"`
	Client        *Rotation `json:"client"`
	Serving       *Rotation `json:"serving"`
	Checks        int       `json:"checks"`
	NotReady      int       `json:"notReady"`
	LogReads      int       `json:"logReads"`
	LogFailures   int       `json:"logFailures"`
	FirstLogError string    `json:"firstLogError,omitempty"`
}

func main() {
	p := benchkit.New("rotation", "bench-rotation")
	p.Namespaces = namespace + "-"
	p.Need = []string{"BOOTSTRAP_KUBECONFIG"}
	p.Run(func(b *benchkit.Bench) error {
		results, err := benchkit.Each(b, func(name string) (Result, error) {
			r, err := measure(b, name)
			if err != nil {
				return r, err
			}
			log.Printf("%s: %+v", name, r)
			b.Clean(context.Background(), "")
			deleteCSRs(b.Client, b.Node)
			return r, nil
		})
		if err != nil {
			return err
		}
		return p.Write(results, report(results, time.Now()))
	})
}

func measure(b *benchkit.Bench, name string) (Result, error) {
	client, env, node := b.Client, b.Env, b.Node
	r := Result{Agent: name, Signing: env["CLUSTER_SIGNING_DURATION"]}
	// Each agent its own namespace: the last one's may still be going.
	namespace := namespace + "-" + name
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go approveServing(ctx, client, node)
	start := time.Now()
	spec := b.Spec(name)
	spec.Bootstrap, spec.ExtraConfig = true, "rotateCertificates: true\nserverTLSBootstrap: true\n"
	a, err := nodeagent.Start(spec)
	if err != nil {
		return r, err
	}
	defer func() {
		a.Stop()
		framework.UnmountUnder(a.Dir, log.Printf)
		_ = os.RemoveAll(a.Dir)
	}()
	if err := nodeagent.WaitNodeReady(ctx, client, node, a, 2*time.Minute); err != nil {
		return r, err
	}
	r.ToReady = time.Since(start).Seconds()
	certDir := filepath.Join(a.Dir, "pki")
	clientPEM, servingPEM := filepath.Join(certDir, "kubelet-client-current.pem"), filepath.Join(certDir, "kubelet-server-current.pem")
	var clientCert, servingCert *x509.Certificate
	if !poll(60*time.Second, func() bool {
		clientCert, _ = readCert(clientPEM)
		servingCert, _ = readCert(servingPEM)
		return clientCert != nil && servingCert != nil
	}) {
		return r, fmt.Errorf("no client or serving certificate in %s (log %s)", certDir, a.LogPath())
	}
	log.Printf("%s: Ready after %.2f s; client serial %s until %s, serving serial %s until %s", name, r.ToReady,
		clientCert.SerialNumber, clientCert.NotAfter.Format(time.TimeOnly), servingCert.SerialNumber, servingCert.NotAfter.Format(time.TimeOnly))
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return r, err
	}
	if !poll(30*time.Second, func() bool {
		_, err := client.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}) {
		return r, errors.New("no default service account")
	}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ticker"}, Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers: []v1.Container{{Name: "c", Image: env["BUSYBOX_IMAGE"], Command: []string{"sh", "-c", "while true; do echo tick; sleep 1; done"}}}}}
	if _, err := client.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	if !poll(60*time.Second, func() bool {
		got, err := client.CoreV1().Pods(namespace).Get(ctx, "ticker", metav1.GetOptions{})
		return err == nil && got.Status.Phase == v1.PodRunning
	}) {
		return r, fmt.Errorf("the pod does not run (log %s)", a.LogPath())
	}
	readLog := func() {
		r.LogReads++
		lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
		defer lcancel()
		b, err := client.CoreV1().Pods(namespace).GetLogs("ticker", &v1.PodLogOptions{TailLines: ptr.To[int64](1)}).DoRaw(lctx)
		if err == nil && !strings.Contains(string(b), "tick") {
			err = fmt.Errorf("log %q", b)
		}
		if err != nil {
			r.LogFailures++
			if r.FirstLogError == "" {
				r.FirstLogError = err.Error()
			}
		}
	}
	readLog()
	deadline := clientCert.NotAfter.Add(time.Minute)
	lastLog := time.Now()
	for time.Now().Before(deadline) && (r.Client == nil || r.Serving == nil) {
		time.Sleep(2 * time.Second)
		select {
		case <-a.Exited():
			return r, fmt.Errorf("%s exited (log %s)", name, a.LogPath())
		default:
		}
		r.Checks++
		if n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil || !ready(n) {
			r.NotReady++
		}
		if cur, err := readCert(clientPEM); err == nil && r.Client == nil && cur.SerialNumber.Cmp(clientCert.SerialNumber) != 0 {
			r.Client = rotation(clientCert, cur, start)
			log.Printf("%s: client certificate rotated: %+v", name, *r.Client)
		}
		if cur, err := readCert(servingPEM); err == nil && r.Serving == nil && cur.SerialNumber.Cmp(servingCert.SerialNumber) != 0 {
			r.Serving = rotation(servingCert, cur, start)
			log.Printf("%s: serving certificate rotated: %+v", name, *r.Serving)
		}
		if time.Since(lastLog) >= 10*time.Second {
			readLog()
			lastLog = time.Now()
		}
	}
	// Once more on the new certificates, a few seconds on.
	time.Sleep(5 * time.Second)
	readLog()
	return r, nil
}

func rotation(old, cur *x509.Certificate, start time.Time) *Rotation {
	now := time.Now()
	life := old.NotAfter.Sub(old.NotBefore)
	return &Rotation{OldSerial: old.SerialNumber.String(), NewSerial: cur.SerialNumber.String(), At: now.Sub(start).Seconds(),
		Fraction: float64(now.Sub(old.NotBefore)) / float64(life)}
}

// approveServing approves the node's kubelet-serving CSRs until ctx ends.
func approveServing(ctx context.Context, client kubernetes.Interface, node string) {
	for ctx.Err() == nil {
		if list, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{}); err == nil {
			for i := range list.Items {
				csr := &list.Items[i]
				if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || csr.Spec.Username != "system:node:"+node || len(csr.Status.Conditions) > 0 {
					continue
				}
				csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
					Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "BenchApproved", Message: "approved by bench/rotation"})
				if _, err := client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
					log.Printf("approve %s: %v", csr.Name, err)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// deleteCSRs removes the node's and the bootstrap token's CSRs.
func deleteCSRs(client kubernetes.Interface, node string) {
	ctx := context.Background()
	list, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, c := range list.Items {
		if strings.HasSuffix(c.Spec.Username, ":"+node) || strings.HasPrefix(c.Spec.Username, "system:bootstrap:") {
			_ = client.CertificatesV1().CertificateSigningRequests().Delete(ctx, c.Name, metav1.DeleteOptions{})
		}
	}
}

// readCert is the first certificate of a PEM file.
func readCert(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, fmt.Errorf("%s: no certificate", path)
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

func ready(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// poll is agent.Poll at this benchmark's interval.
func poll(timeout time.Duration, cond func() bool) bool {
	return nodeagent.Poll(timeout, 200*time.Millisecond, cond)
}
