package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// stackEnv returns the .stack/env variables the test needs; an older stack
// without them fails the test in CI and skips it elsewhere.
// refusedByRegistry: a pull error says the registry wanted credentials
// (containerd 1.6 quotes the registry's 401; containerd 2 says
// "authorization failed: no basic auth credentials" when it had none).
func refusedByRegistry(msg string) bool {
	return strings.Contains(msg, "401 Unauthorized") || strings.Contains(msg, "authorization failed")
}

func stackEnv(t *testing.T, c *framework.Cluster, keys ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range keys {
		v := c.Env[k]
		if v == "" {
			if framework.InCI() {
				t.Fatalf(".stack/env lacks %s: run hack/stack-up.sh", k)
			}
			t.Skipf(".stack/env lacks %s (an older stack): run hack/stack-up.sh", k)
		}
		out[k] = v
	}
	return out
}

// reasonSeen is one state of a pod's container as the API showed it.
type reasonSeen struct {
	reason  string // waiting reason, or "Running", or "Terminated"
	message string
	at      time.Time
}

// reasonLog records, per pod of a namespace, every change of its container's
// state in the API (through an informer: every status write is seen).
type reasonLog struct {
	mu   sync.Mutex
	pods map[string][]reasonSeen
}

func watchReasons(t *testing.T, c *framework.Cluster, ns string) *reasonLog {
	l := &reasonLog{pods: map[string][]reasonSeen{}}
	f := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	record := func(obj any) {
		p, ok := obj.(*v1.Pod)
		if !ok || len(p.Status.ContainerStatuses) == 0 {
			return
		}
		st := p.Status.ContainerStatuses[0].State
		s := reasonSeen{at: time.Now()}
		switch {
		case st.Waiting != nil:
			s.reason, s.message = st.Waiting.Reason, st.Waiting.Message
		case st.Running != nil:
			s.reason = "Running"
		case st.Terminated != nil:
			s.reason = "Terminated"
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		seq := l.pods[p.Name]
		if len(seq) == 0 || seq[len(seq)-1].reason != s.reason {
			l.pods[p.Name] = append(seq, s)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	})
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	f.Start(stop)
	f.WaitForCacheSync(stop)
	return l
}

func (l *reasonLog) get(pod string) []reasonSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]reasonSeen(nil), l.pods[pod]...)
}

func reasons(seq []reasonSeen) []string {
	var out []string
	for _, s := range seq {
		out = append(out, s.reason)
	}
	return out
}

// pullCycles counts ErrImagePull -> ImagePullBackOff transitions in seq.
func pullCycles(seq []reasonSeen) int {
	n := 0
	for i := 1; i < len(seq); i++ {
		if seq[i-1].reason == "ErrImagePull" && seq[i].reason == "ImagePullBackOff" {
			n++
		}
	}
	return n
}

func dockerConfigSecret(name, registry, user, password string) *v1.Secret {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{
		registry: map[string]string{"username": user, "password": password, "auth": auth},
	}})
	return &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Type:       v1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{v1.DockerConfigJsonKey: cfg},
	}
}

func podEvents(t *testing.T, c *framework.Cluster, ns, pod string) []v1.Event {
	t.Helper()
	evs, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + pod,
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs.Items
}

// TestImagePullSecrets: the private registry wants a password. A pod without
// a pull secret, one whose secret has a wrong password and one whose secret
// does not exist get ErrImagePull, then ImagePullBackOff, then ErrImagePull
// again when the 10 s back-off ends, and never run; a pod with the right
// kubernetes.io/dockerconfigjson secret runs.
func TestImagePullSecrets(t *testing.T) {
	name := "e2e-pullsecrets"
	c, n := clusterNode(t, name, "")
	env := stackEnv(t, c, "PRIVATE_REGISTRY", "PRIVATE_REGISTRY_USER", "PRIVATE_REGISTRY_PASSWORD", "PRIVATE_IMAGE")
	ns := c.Namespace(t, "pullsecrets")
	ctx := context.Background()
	for _, s := range []*v1.Secret{
		dockerConfigSecret("right", env["PRIVATE_REGISTRY"], env["PRIVATE_REGISTRY_USER"], env["PRIVATE_REGISTRY_PASSWORD"]),
		dockerConfigSecret("wrong", env["PRIVATE_REGISTRY"], env["PRIVATE_REGISTRY_USER"], "not-the-password"),
	} {
		if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	log := watchReasons(t, c, ns)
	pods := map[string][]string{ // pod -> its imagePullSecrets
		"nosecret": nil,
		"wrong":    {"wrong"},
		"missing":  {"does-not-exist"},
		"right":    {"right"},
	}
	start := time.Now()
	for pod, secrets := range pods {
		p := busyboxPod(pod, name, "sleep 3600")
		// Always: the image may be on the node already (an earlier run);
		// only a pull proves the credentials.
		p.Spec.Containers[0].Image = env["PRIVATE_IMAGE"]
		p.Spec.Containers[0].ImagePullPolicy = v1.PullAlways
		for _, s := range secrets {
			p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: s})
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	waitPod(t, c, ns, "right", 60*time.Second, "running with the right pull secret", podReady)
	t.Logf("right: running after %v, states %v", time.Since(start).Round(100*time.Millisecond), reasons(log.get("right")))
	// It was pulled with the secret's credentials.
	if want := fmt.Sprintf(`pod=%q`, ns+"/right"); !strings.Contains(n.Log(), want) ||
		!regexp.MustCompile(`"Pulled image" pod="`+ns+`/right".* pullSecret="`+ns+`/right"`).MatchString(n.Log()) {
		t.Errorf("nodelet's log has no pull of %s with the secret %s/right", want, ns)
	}

	failing := []string{"nosecret", "wrong", "missing"}
	// On failure, every event of the four pods: what was seen and how often.
	defer func() {
		if t.Failed() {
			for _, pod := range append(failing, "right") {
				for _, e := range podEvents(t, c, ns, pod) {
					t.Logf("event %s: %s %s x%d %q", pod, e.Type, e.Reason, e.Count, e.Message)
				}
			}
		}
	}()
	// Two full cycles: ErrImagePull, ImagePullBackOff, ErrImagePull (the
	// next pull, 10 s later), ImagePullBackOff.
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		for _, pod := range failing {
			if pullCycles(log.get(pod)) < 2 {
				return false
			}
		}
		return true
	}, "ErrImagePull then ImagePullBackOff twice for %v", failing)
	for _, pod := range failing {
		seq := log.get(pod)
		t.Logf("%s: %v", pod, reasons(seq))
		var errAt []time.Time
		for _, s := range seq {
			switch s.reason {
			case "Running", "Terminated":
				t.Errorf("%s: the container got to %s without credentials", pod, s.reason)
			case "ErrImagePull":
				errAt = append(errAt, s.at)
				if !strings.Contains(s.message, env["PRIVATE_IMAGE"]) || !refusedByRegistry(s.message) {
					t.Errorf("%s: ErrImagePull message %q lacks the image or the registry's 401", pod, s.message)
				}
			case "ImagePullBackOff":
				if !strings.Contains(s.message, "Back-off pulling image") || !refusedByRegistry(s.message) {
					t.Errorf("%s: ImagePullBackOff message %q lacks the back-off or the last pull's error", pod, s.message)
				}
			}
		}
		// The second pull waits for the 10 s back-off.
		if len(errAt) >= 2 {
			if gap := errAt[1].Sub(errAt[0]); gap < 9*time.Second || gap > 20*time.Second {
				t.Errorf("%s: %v between the first two pulls, want the 10 s back-off", pod, gap)
			} else {
				t.Logf("%s: second pull %v after the first", pod, gap.Round(100*time.Millisecond))
			}
		}
		if cs := c.Containers(t, pod, "c"); len(cs) != 0 {
			t.Errorf("%s: %d containers in containerd, want none", pod, len(cs))
		}
	}

	// Events: the failed pulls, the back-off, and the missing secret.
	has := func(pod, reason, substr string) bool {
		for _, e := range podEvents(t, c, ns, pod) {
			if e.Reason == reason && strings.Contains(e.Message, substr) {
				return true
			}
		}
		return false
	}
	framework.Eventually(t, 20*time.Second, 500*time.Millisecond, func() bool {
		return has("missing", "FailedToRetrieveImagePullSecret", "Unable to retrieve some image pull secrets (does-not-exist)")
	}, "FailedToRetrieveImagePullSecret event for the pod with a missing secret")
	for _, pod := range failing {
		if !(has(pod, "Failed", "401 Unauthorized") || has(pod, "Failed", "authorization failed")) || !has(pod, "BackOff", "Back-off pulling image") {
			t.Errorf("%s: no Failed (401) or BackOff event", pod)
		}
	}
	if !has("right", "Pulled", "Successfully pulled image") {
		t.Errorf("right: no Pulled event")
	}
	for _, pod := range []string{"right", "wrong", "nosecret"} {
		if has(pod, "FailedToRetrieveImagePullSecret", "") {
			t.Errorf("%s: FailedToRetrieveImagePullSecret although its secrets exist", pod)
		}
	}
}

// pullInterval is one pull as nodelet logged it: when it ended, how long the
// pull itself took and how long with the wait for a pull slot.
type pullInterval struct {
	pod               string
	start, end        time.Time
	pull, withWaiting time.Duration
}

var (
	logTime       = regexp.MustCompile(`^I\d{4} (\d\d:\d\d:\d\d\.\d{6}) `)
	logPod        = regexp.MustCompile(` pod="([^"]+)"`)
	logPull       = regexp.MustCompile(` pullTime="([^"]+)"`)
	logPullWaited = regexp.MustCompile(` withWaiting="([^"]+)"`)
)

// pulls parses nodelet's "Pulled image" lines for the pods of ns.
func pulls(t *testing.T, log, ns string) []pullInterval {
	t.Helper()
	var out []pullInterval
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `"Pulled image"`) {
			continue
		}
		tm, pod, pt, wt := logTime.FindStringSubmatch(line), logPod.FindStringSubmatch(line),
			logPull.FindStringSubmatch(line), logPullWaited.FindStringSubmatch(line)
		if tm == nil || pod == nil || pt == nil || wt == nil {
			t.Fatalf("unexpected Pulled image line %q", line)
		}
		if !strings.HasPrefix(pod[1], ns+"/") {
			continue
		}
		end, err := time.Parse("15:04:05.000000", tm[1])
		if err != nil {
			t.Fatalf("log time %q: %v", tm[1], err)
		}
		pull, err1 := time.ParseDuration(pt[1])
		waited, err2 := time.ParseDuration(wt[1])
		if err1 != nil || err2 != nil {
			t.Fatalf("durations in %q: %v %v", line, err1, err2)
		}
		out = append(out, pullInterval{pod: pod[1], start: end.Add(-pull), end: end, pull: pull, withWaiting: waited})
	}
	return out
}

// maxOverlap is the largest number of pulls in progress at once, each
// interval shrunk by margin at both ends (a pull that starts as another ends
// is not an overlap).
func maxOverlap(ps []pullInterval, margin time.Duration) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, p := range ps {
		s, e := p.start.Add(margin), p.end.Add(-margin)
		if !s.Before(e) {
			continue
		}
		edges = append(edges, edge{s, 1}, edge{e, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta
		}
		return edges[i].at.Before(edges[j].at)
	})
	n, best := 0, 0
	for _, e := range edges {
		n += e.delta
		best = max(best, n)
	}
	return best
}

// TestParallelImagePulls: four pods with four different slow images (every
// manifest request to the test registry's slow/ repositories waits
// SLOW_IMAGE_DELAY, so a pull takes two delays) on a node that pulls them
// one at a time (serializeImagePulls: true), two at a time
// (maxParallelImagePulls: 2) or all at once (serializeImagePulls: false).
// nodelet logs each pull's end and duration: the number of pulls in
// progress at once and the time all of them took are checked against what
// each setting allows.
func TestParallelImagePulls(t *testing.T) {
	const images = 4
	cases := []struct {
		name    string
		config  string
		overlap int     // pulls in progress at once
		minSpan float64 // bounds of (first start .. last end) / (sum of pull times)
		maxSpan float64
	}{
		{"serialized", "serializeImagePulls: true\n", 1, 0.97, 1.5},
		{"max2", "serializeImagePulls: false\nmaxParallelImagePulls: 2\n", 2, 0.45, 0.75},
		{"unlimited", "serializeImagePulls: false\n", images, 0.2, 0.5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := "e2e-pull-" + tc.name
			c := framework.RequireCluster(t)
			env := stackEnv(t, c, "SLOW_IMAGE_REPO", "SLOW_IMAGE_COUNT", "SLOW_IMAGE_DELAY")
			delay, err := time.ParseDuration(env["SLOW_IMAGE_DELAY"])
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			var refs []string
			for i := 1; i <= images; i++ {
				ref := fmt.Sprintf("%s:%d", env["SLOW_IMAGE_REPO"], i)
				refs = append(refs, ref)
				// Not on the node: each pod pulls. (Each slow image has its
				// own ID, so no other image goes with it.)
				if st, err := c.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false); err == nil && st.GetImage() != nil {
					if err := c.Images.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: ref}); err != nil {
						t.Fatalf("remove %s: %v", ref, err)
					}
				}
			}
			c, n := clusterNode(t, node, tc.config)
			ns := c.Namespace(t, "pull-"+tc.name)
			begin := time.Now()
			for i, ref := range refs {
				p := busyboxPod(fmt.Sprintf("slow-%d", i+1), node, "sleep 3600")
				p.Spec.Containers[0].Image = ref
				p.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
				if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range refs {
				waitPod(t, c, ns, fmt.Sprintf("slow-%d", i+1), 90*time.Second, "running", podReady)
			}
			elapsed := time.Since(begin)
			var ps []pullInterval
			framework.Eventually(t, 10*time.Second, 200*time.Millisecond, func() bool {
				ps = pulls(t, n.Log(), ns)
				return len(ps) == images
			}, "%d Pulled image lines in nodelet's log", images)

			var sum time.Duration
			first, last := ps[0].start, ps[0].end
			for _, p := range ps {
				t.Logf("%s: pull %v, %v with waiting, [%s .. %s]", p.pod, p.pull.Round(time.Millisecond), p.withWaiting.Round(time.Millisecond),
					p.start.Format("15:04:05.000"), p.end.Format("15:04:05.000"))
				// A pull of a slow image costs two delays (resolve, then the
				// manifest by digest).
				if p.pull < 2*delay*9/10 || p.pull > 2*delay+3*time.Second {
					t.Errorf("%s: pull of %v, want about 2 x %v", p.pod, p.pull, delay)
				}
				sum += p.pull
				if p.start.Before(first) {
					first = p.start
				}
				if p.end.After(last) {
					last = p.end
				}
			}
			span := last.Sub(first)
			overlap := maxOverlap(ps, 100*time.Millisecond)
			ratio := float64(span) / float64(sum)
			t.Logf("%s: %d pulls, %v of pulling in all, done in %v (%.2f of it); at most %d at once; all pods running after %v",
				tc.name, len(ps), sum.Round(time.Millisecond), span.Round(time.Millisecond), ratio, overlap, elapsed.Round(100*time.Millisecond))
			if overlap != tc.overlap {
				t.Errorf("at most %d pulls at once, want %d", overlap, tc.overlap)
			}
			if ratio < tc.minSpan || ratio > tc.maxSpan {
				t.Errorf("the pulls took %v for %v of pulling (%.2f), want %.2f..%.2f", span, sum, ratio, tc.minSpan, tc.maxSpan)
			}
		})
	}
}

// TestClusterEnsureSecretPulledImages: KubeletEnsureSecretPulledImages (beta,
// on), with upstream's default policy NeverVerifyPreloadedImages: once a pod
// pulled the private image with its pull secret, a pod of the node without
// credentials does not get it from the node (IfNotPresent pulls and the
// registry refuses; Never says it is not present), while a pod with that
// secret, or another secret holding the same credentials, uses it without a
// pull. The records are upstream's files under <root-dir>/image_manager and
// hold across a nodelet restart.
func TestClusterEnsureSecretPulledImages(t *testing.T) {
	name := "e2e-ensure-pulls"
	c, n := clusterNode(t, name, "")
	env := stackEnv(t, c, "PRIVATE_REGISTRY", "PRIVATE_REGISTRY_USER", "PRIVATE_REGISTRY_PASSWORD", "PRIVATE_IMAGE")
	ns := c.Namespace(t, "ensurepulls")
	ctx := context.Background()
	for _, s := range []*v1.Secret{
		dockerConfigSecret("right", env["PRIVATE_REGISTRY"], env["PRIVATE_REGISTRY_USER"], env["PRIVATE_REGISTRY_PASSWORD"]),
		dockerConfigSecret("copy", env["PRIVATE_REGISTRY"], env["PRIVATE_REGISTRY_USER"], env["PRIVATE_REGISTRY_PASSWORD"]),
	} {
		if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(pod string, policy v1.PullPolicy, secrets ...string) {
		t.Helper()
		p := busyboxPod(pod, name, "sleep 3600")
		p.Spec.Containers[0].Image = env["PRIVATE_IMAGE"]
		p.Spec.Containers[0].ImagePullPolicy = policy
		for _, s := range secrets {
			p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: s})
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hasEvent := func(pod, reason, substr string) bool {
		for _, e := range podEvents(t, c, ns, pod) {
			if e.Reason == reason && strings.Contains(e.Message, substr) {
				return true
			}
		}
		return false
	}
	// Always: the image may be on the node from another test, without a
	// record of this node's (a preloaded image, which the default policy
	// does not verify); the pull with the secret makes the record.
	create("first", v1.PullAlways, "right")
	waitPod(t, c, ns, "first", 60*time.Second, "Ready", podReady)

	create("nosecret", v1.PullIfNotPresent)
	create("never", v1.PullNever)
	create("same", v1.PullIfNotPresent, "right")
	create("copy", v1.PullIfNotPresent, "copy")
	for _, pod := range []string{"same", "copy"} {
		waitPod(t, c, ns, pod, 60*time.Second, "Ready", podReady)
	}
	waitPod(t, c, ns, "nosecret", 60*time.Second, "ErrImagePull or ImagePullBackOff", func(p *v1.Pod) bool {
		return waitingReason(p, "ErrImagePull", "") || waitingReason(p, "ImagePullBackOff", "")
	})
	waitPod(t, c, ns, "never", 60*time.Second, "ErrImageNeverPull", func(p *v1.Pod) bool {
		return waitingReason(p, "ErrImageNeverPull", "is not present with pull policy of Never")
	})
	framework.Eventually(t, 20*time.Second, 500*time.Millisecond, func() bool {
		return hasEvent("same", "Pulled", "already present on machine and can be accessed by the pod") &&
			hasEvent("copy", "Pulled", "already present on machine and can be accessed by the pod") &&
			hasEvent("nosecret", "Failed", "Failed to pull image")
	}, "the pods' events")

	// The record: upstream's file, naming the secret it was pulled with.
	files, _ := filepath.Glob(filepath.Join(n.RootDir, "image_manager", "pulled", "sha256-*"))
	found := false
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(data), `"kind":"ImagePulledRecord"`) &&
			strings.Contains(string(data), `"name":"right"`) && strings.Contains(string(data), `"namespace":"`+ns+`"`) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no pulled record naming the secret %s/right among %v", ns, files)
	}

	// After a restart, the node still does not hand the image out.
	n.Stop()
	n.Start()
	create("after", v1.PullIfNotPresent)
	create("afterright", v1.PullIfNotPresent, "right")
	waitPod(t, c, ns, "afterright", 60*time.Second, "Ready", podReady)
	waitPod(t, c, ns, "after", 60*time.Second, "ErrImagePull or ImagePullBackOff", func(p *v1.Pod) bool {
		return waitingReason(p, "ErrImagePull", "") || waitingReason(p, "ImagePullBackOff", "")
	})
}
