package apiserver

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodelet/nodelet/internal/podspec"
)

// The source runs in a synctest bubble with the fake clientset: the
// informer's goroutines, timers and the fake watch are the bubble's, so
// synctest.Wait tells when everything the source will send was sent.

const node = "n1"

func pod(name string, uid types.UID) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
}

func mirrorPod(name string, uid types.UID) *v1.Pod {
	p := pod(name, uid)
	p.Annotations = map[string]string{podspec.ConfigMirrorAnnotationKey: "hash"}
	return p
}

// started runs a Source of client for node until the test ends, and
// returns it with its first event.
func started(t *testing.T, client *fake.Clientset) (*Source, Event) {
	t.Helper()
	s, err := New(Config{Client: client, NodeName: node})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		synctest.Wait() // the informer's goroutines end too
	})
	first := <-s.Events()
	// The informer watches now (or never will): what is created from here
	// on comes as watch events.
	synctest.Wait()
	return s, first
}

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

// quiet fails t if the source sent anything more.
func quiet(t *testing.T, s *Source, after string) {
	t.Helper()
	synctest.Wait()
	select {
	case e := <-s.Events():
		t.Errorf("after %s: event %v %v", after, e.Op, names(e.Pods))
	default:
	}
	select {
	case m := <-s.Mirrors():
		t.Errorf("after %s: mirror pod %s", after, m.Name)
	default:
	}
}

func next(t *testing.T, s *Source, op Op, name string) *v1.Pod {
	t.Helper()
	synctest.Wait()
	select {
	case e := <-s.Events():
		if e.Op != op || len(e.Pods) != 1 || e.Pods[0].Name != name {
			t.Fatalf("event %v %v, want %v [%s]", e.Op, names(e.Pods), op, name)
		}
		return e.Pods[0]
	default:
		t.Fatalf("no event, want %v [%s]", op, name)
	}
	return nil
}

func nextMirror(t *testing.T, s *Source, name string) *v1.Pod {
	t.Helper()
	synctest.Wait()
	select {
	case m := <-s.Mirrors():
		if m.Name != name {
			t.Fatalf("mirror pod %s, want %s", m.Name, name)
		}
		return m
	default:
		t.Fatalf("no mirror pod, want %s", name)
	}
	return nil
}

// The first event is the full Set of the listed pods, mirror pods left
// out, and the pods listed are not sent again one by one; the list and the
// watch ask for the node's pods only.
func TestSourceFirstSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(pod("a", "ua"), pod("b", "ub"), mirrorPod("static-n1", "um"))
		s, first := started(t, client)
		if first.Op != Set || !slices.Equal(names(first.Pods), []string{"a", "b"}) {
			t.Fatalf("first event %v %v, want Set [a b]", first.Op, names(first.Pods))
		}
		quiet(t, s, "the first Set")

		var lists, watches int
		for _, a := range client.Actions() {
			if a.GetResource().Resource != "pods" {
				continue
			}
			switch a := a.(type) {
			case k8stesting.ListAction:
				lists++
				if f := a.GetListRestrictions().Fields.String(); f != "spec.nodeName="+node {
					t.Errorf("list with field selector %q", f)
				}
			case k8stesting.WatchAction:
				watches++
				if f := a.GetWatchRestrictions().Fields.String(); f != "spec.nodeName="+node {
					t.Errorf("watch with field selector %q", f)
				}
			}
		}
		if lists == 0 || watches == 0 {
			t.Errorf("%d lists, %d watches of pods", lists, watches)
		}
	})
}

// Every pod is annotated with its source, api, as upstream's pod config
// does: one whose author wrote "file" there is not a static pod. The
// informer's own object keeps what the API has.
func TestSourceAnnotatesAPISource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		fakeStatic := pod("a", "ua")
		fakeStatic.Annotations = map[string]string{podspec.ConfigSourceAnnotationKey: podspec.FileSource, "x": "y"}
		client := fake.NewClientset(fakeStatic)
		s, first := started(t, client)
		if len(first.Pods) != 1 || first.Pods[0].Annotations[podspec.ConfigSourceAnnotationKey] != "api" || first.Pods[0].Annotations["x"] != "y" ||
			podspec.IsStatic(first.Pods[0]) {
			t.Fatalf("first Set %v, want a with config.source api", first.Pods)
		}
		if cached, _ := s.Lister().Pods("ns").Get("a"); cached.Annotations[podspec.ConfigSourceAnnotationKey] != podspec.FileSource {
			t.Errorf("the informer's pod changed: %v", cached.Annotations)
		}
		if _, err := client.CoreV1().Pods("ns").Create(ctx, pod("b", "ub"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := next(t, s, Add, "b"); got.Annotations[podspec.ConfigSourceAnnotationKey] != "api" {
			t.Errorf("added pod's annotations %v", got.Annotations)
		}
	})
}

// Without pods the first Set is empty: the source has been seen.
func TestSourceFirstSetEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, first := started(t, fake.NewClientset())
		if first.Op != Set || len(first.Pods) != 0 {
			t.Fatalf("first event %v %v, want an empty Set", first.Op, names(first.Pods))
		}
		quiet(t, s, "the first Set")
	})
}

// After the Set: added, changed and deleted pods, one event each; changes
// of status only are not sent, but a readiness gate's condition is.
func TestSourceEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		client := fake.NewClientset(pod("a", "ua"))
		pods := client.CoreV1().Pods("ns")
		s, _ := started(t, client)

		p, err := pods.Create(ctx, pod("b", "ub"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		next(t, s, Add, "b")
		quiet(t, s, "an Add")

		p.Labels = map[string]string{"app": "web"}
		if p, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := next(t, s, Update, "b"); got.Labels["app"] != "web" {
			t.Errorf("update sent %v, want the new labels", got.Labels)
		}

		p.Spec.ActiveDeadlineSeconds = ptrTo[int64](30)
		if p, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		next(t, s, Update, "b")

		// Our own status patches: nothing.
		p.Status.Phase = v1.PodRunning
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
		if p, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		quiet(t, s, "a status update")

		// A readiness gate's condition: sent.
		p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/ready"}}
		if p, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		next(t, s, Update, "b")
		p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: "example.com/ready", Status: v1.ConditionTrue})
		if p, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		next(t, s, Update, "b")
		p.Status.Conditions = p.Status.Conditions[:1] // a status change beside the gate's
		p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: "example.com/ready", Status: v1.ConditionTrue},
			v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue})
		if _, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		quiet(t, s, "a status update keeping the gate's condition")

		if err := pods.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := next(t, s, Delete, "a"); got.UID != "ua" {
			t.Errorf("deleted %s", got.UID)
		}
		quiet(t, s, "a Delete")
	})
}

// Mirror pods go to the Mirrors channel, never to Events: when added,
// when their annotations change or they are being deleted, and when
// deleted; other changes of theirs are not sent.
func TestSourceMirrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		client := fake.NewClientset()
		pods := client.CoreV1().Pods("ns")
		s, _ := started(t, client)

		m, err := pods.Create(ctx, mirrorPod("static-n1", "um"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nextMirror(t, s, "static-n1")
		quiet(t, s, "a mirror pod's creation")

		m.Status.Phase = v1.PodRunning
		if m, err = pods.UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		m.Labels = map[string]string{"tier": "control-plane"}
		if m, err = pods.Update(ctx, m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		quiet(t, s, "a mirror pod's status and labels")

		m.Annotations[podspec.ConfigMirrorAnnotationKey] = "new-hash"
		if m, err = pods.Update(ctx, m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := nextMirror(t, s, "static-n1"); got.Annotations[podspec.ConfigMirrorAnnotationKey] != "new-hash" {
			t.Errorf("mirror pod sent with %v", got.Annotations)
		}

		now := metav1.NewTime(time.Now())
		m.DeletionTimestamp = &now
		if _, err = pods.Update(ctx, m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := nextMirror(t, s, "static-n1"); got.DeletionTimestamp == nil {
			t.Error("mirror pod being deleted sent without its deletion timestamp")
		}

		if err := pods.Delete(ctx, "static-n1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		nextMirror(t, s, "static-n1")
		quiet(t, s, "a mirror pod's deletion")
	})
}

// The Lister is the informer's store: the node's pods, mirror pods
// included, as the watch changes them.
func TestSourceLister(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		client := fake.NewClientset(pod("a", "ua"), mirrorPod("static-n1", "um"))
		s, _ := started(t, client)
		all, err := s.Lister().List(everything)
		if err != nil || !slices.Equal(names(all), []string{"a", "static-n1"}) {
			t.Fatalf("listed %v, %v", names(all), err)
		}
		if _, err := client.CoreV1().Pods("other").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "other", UID: "uc"},
			Spec: v1.PodSpec{NodeName: node}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.CoreV1().Pods("ns").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if p, err := s.Lister().Pods("other").Get("c"); err != nil || p.UID != "uc" {
			t.Errorf("Get other/c: %v, %v", p, err)
		}
		if _, err := s.Lister().Pods("ns").Get("a"); !apierrors.IsNotFound(err) {
			t.Errorf("Get of a deleted pod: %v", err)
		}
		if inNS, _ := s.Lister().Pods("ns").List(everything); !slices.Equal(names(inNS), []string{"static-n1"}) {
			t.Errorf("pods of ns %v", names(inNS))
		}
	})
}

// While the API server does not answer (a connection error, not an API
// status) the list is tried again every second or two, and the first Set
// follows its first answer.
func TestSourceRetriesUnreachableAPIServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(pod("a", "ua"))
		var mu sync.Mutex
		var attempts []time.Time
		client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			attempts = append(attempts, time.Now())
			if len(attempts) <= 3 {
				return true, nil, errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
			}
			return false, nil, nil
		})
		start := time.Now()
		_, first := started(t, client)
		if first.Op != Set || !slices.Equal(names(first.Pods), []string{"a"}) {
			t.Fatalf("first event %v %v", first.Op, names(first.Pods))
		}
		mu.Lock()
		defer mu.Unlock()
		if len(attempts) != 4 {
			t.Fatalf("%d lists, want 4", len(attempts))
		}
		prev := start
		for i, at := range attempts {
			gap := at.Sub(prev)
			if i == 0 && gap != 0 || i > 0 && (gap < retryPeriod || gap > 2*retryPeriod) {
				t.Errorf("list %d after %v", i+1, gap)
			}
			prev = at
		}
	})
}

func TestPatiently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		// An answer of the API server, even an error, is returned at once.
		calls := 0
		forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no"))
		_, err := patiently(ctx, func() (int, error) { calls++; return 0, forbidden })
		if !apierrors.IsForbidden(err) || calls != 1 {
			t.Errorf("API error: %v after %d calls", err, calls)
		}
		// No answer: tried again until one.
		calls = 0
		start := time.Now()
		v, err := patiently(ctx, func() (int, error) {
			calls++
			if calls < 3 {
				return 0, errors.New("connection refused")
			}
			return 7, nil
		})
		if v != 7 || err != nil || calls != 3 {
			t.Errorf("got %d, %v after %d calls", v, err, calls)
		}
		if took := time.Since(start); took < 2*retryPeriod || took > 4*retryPeriod {
			t.Errorf("two retries took %v", took)
		}
		// A context done: the last error.
		cctx, cancel := context.WithCancel(ctx)
		calls = 0
		_, err = patiently(cctx, func() (int, error) {
			calls++
			if calls == 2 {
				cancel()
			}
			return 0, errors.New("connection refused")
		})
		if err == nil || calls != 2 {
			t.Errorf("cancelled: %v after %d calls", err, calls)
		}
	})
}

// Run returns when its context is done before the first list answered,
// sending nothing.
func TestSourceRunStopsBeforeSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("connection refused")
		})
		s, err := New(Config{Client: client, NodeName: node})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Run(ctx)
		}()
		time.Sleep(time.Minute) // fake time: the lists keep failing
		cancel()
		<-done
		synctest.Wait()
		select {
		case e := <-s.Events():
			t.Errorf("event %v %v before any list answered", e.Op, names(e.Pods))
		default:
		}
	})
}

func ptrTo[T any](v T) *T { return &v }
