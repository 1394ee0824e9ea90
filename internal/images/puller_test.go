package images

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/ctortest"
)

// newPuller is New for tests: it fails the test on an error.
func newPuller(t *testing.T, cfg Config) *Puller {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNew(t *testing.T) {
	svc := critest.NewFakeImageService()
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no service", Config: Config{}, WantErr: "Config.Service is required"},
		{Name: "a nil clock is the real one", Config: Config{Service: svc}},
	}, func(t *testing.T, p *Puller) {
		ctortest.RealClock(t, p.clock)
	})
}

func TestEnsureImage(t *testing.T) {
	tests := []struct {
		name       string
		image      string
		policy     v1.PullPolicy
		present    bool
		pullErr    error
		wantPulls  int
		wantReason string
	}{
		{"Always pulls even when present", "busybox:1.36", v1.PullAlways, true, nil, 1, ""},
		{"IfNotPresent uses the present image", "busybox:1.36", v1.PullIfNotPresent, true, nil, 0, ""},
		{"IfNotPresent pulls a missing image", "busybox:1.36", v1.PullIfNotPresent, false, nil, 1, ""},
		{"Never with the image present", "busybox:1.36", v1.PullNever, true, nil, 0, ""},
		{"Never with the image missing", "busybox:1.36", v1.PullNever, false, nil, 0, ReasonErrImageNeverPull},
		{"a failed pull", "busybox:1.36", v1.PullIfNotPresent, false, errors.New("not found"), 1, ReasonErrImagePull},
		{"an invalid name", "bad image", v1.PullIfNotPresent, false, nil, 0, ReasonInvalidImageName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := critest.NewFakeImageService()
			if tt.present {
				svc.SetFakeImages([]string{tt.image})
			}
			if tt.pullErr != nil {
				svc.InjectError("PullImage", tt.pullErr)
			}
			p := newPuller(t, Config{Service: svc, Clock: testingclock.NewFakeClock(time.Now()), Serialize: true})
			pod := &v1.Pod{}
			pod.UID = "u"
			c := &v1.Container{Name: "c", Image: tt.image, ImagePullPolicy: tt.policy}
			_, err := p.EnsureImage(context.Background(), pod, c, nil)
			pulls := 0
			for _, call := range svc.Called {
				if call == "PullImage" {
					pulls++
				}
			}
			if pulls != tt.wantPulls {
				t.Errorf("%d pulls, want %d", pulls, tt.wantPulls)
			}
			var ie *Error
			switch {
			case tt.wantReason == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.wantReason != "" && (!errors.As(err, &ie) || ie.Reason != tt.wantReason):
				t.Errorf("error %v, want reason %s", err, tt.wantReason)
			}
		})
	}
}

func TestPullBackOff(t *testing.T) {
	svc := critest.NewFakeImageService()
	clk := testingclock.NewFakeClock(time.Now())
	p := newPuller(t, Config{Service: svc, Clock: clk})
	pod := &v1.Pod{}
	pod.UID = "u"
	c := &v1.Container{Name: "c", Image: "missing:1", ImagePullPolicy: v1.PullIfNotPresent}
	reason := func() string {
		_, err := p.EnsureImage(context.Background(), pod, c, nil)
		var ie *Error
		if errors.As(err, &ie) {
			return ie.Reason
		}
		return ""
	}
	svc.InjectError("PullImage", errors.New("not found"))
	if r := reason(); r != ReasonErrImagePull {
		t.Fatalf("first failure: %q", r)
	}
	if r := reason(); r != ReasonErrImagePull {
		t.Fatalf("retry at once: %q, want the pull's error again", r)
	}
	clk.Step(ReportBackOffAfter)
	if r := reason(); r != ReasonImagePullBackOff {
		t.Fatalf("retry inside the back-off: %q, want ImagePullBackOff", r)
	}
	clk.Step(BackoffInitial - ReportBackOffAfter)
	svc.InjectError("PullImage", errors.New("not found"))
	if r := reason(); r != ReasonErrImagePull {
		t.Fatalf("retry after 10 s: %q, want a new pull", r)
	}
	clk.Step(BackoffInitial)
	if r := reason(); r != ReasonImagePullBackOff {
		t.Fatalf("second back-off should be 20 s, got %q after 10 s", r)
	}
	clk.Step(BackoffInitial)
	if r := reason(); r != "" {
		t.Fatalf("pull after the 20 s back-off: %q", r)
	}
}

func TestNormalizeImage(t *testing.T) {
	for in, want := range map[string]string{
		"busybox":                "busybox:latest",
		"busybox:1.36":           "busybox:1.36",
		"localhost:5000/busybox": "localhost:5000/busybox:latest",
		"busybox@sha256:ab":      "busybox@sha256:ab",
	} {
		if got, err := NormalizeImage(in); err != nil || got != want {
			t.Errorf("NormalizeImage(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// The status a pod shows over time when its image cannot be pulled:
// ErrImagePull right after each failed pull, ImagePullBackOff (with the
// pull's error) on the syncs in between, and the sync asked for when each
// changes.
func TestPullErrorThenBackOffSequence(t *testing.T) {
	svc := critest.NewFakeImageService()
	clk := testingclock.NewFakeClock(time.Now())
	p := newPuller(t, Config{Service: svc, Clock: clk})
	pod := &v1.Pod{}
	pod.UID = "u"
	c := &v1.Container{Name: "c", Image: "private.example/app:1", ImagePullPolicy: v1.PullAlways}
	steps := []struct {
		advance    time.Duration // before the sync
		fail       bool          // the pull, if one happens, fails
		wantReason string
		wantRetry  time.Duration
		wantPulls  int // PullImage calls so far
	}{
		{0, true, ReasonErrImagePull, ReportBackOffAfter, 1},
		// A sync at once (the sandbox's PLEG event): still the pull's error.
		{300 * time.Millisecond, false, ReasonErrImagePull, ReportBackOffAfter - 300*time.Millisecond, 1},
		{ReportBackOffAfter - 300*time.Millisecond, false, ReasonImagePullBackOff, BackoffInitial - ReportBackOffAfter, 1},
		{3 * time.Second, false, ReasonImagePullBackOff, BackoffInitial - ReportBackOffAfter - 3*time.Second, 1},
		{BackoffInitial - ReportBackOffAfter - 3*time.Second, true, ReasonErrImagePull, ReportBackOffAfter, 2},
		{ReportBackOffAfter, false, ReasonImagePullBackOff, 2*BackoffInitial - ReportBackOffAfter, 2},
		{2*BackoffInitial - ReportBackOffAfter, false, "", 0, 3},
	}
	for i, st := range steps {
		clk.Step(st.advance)
		if st.fail {
			svc.InjectError("PullImage", errors.New("401 Unauthorized"))
		}
		_, err := p.EnsureImage(context.Background(), pod, c, nil)
		reason, retry, msg := "", time.Duration(0), ""
		var ie *Error
		if errors.As(err, &ie) {
			reason, retry, msg = ie.Reason, ie.RetryAfter, ie.Message
		}
		pulls := 0
		for _, call := range svc.Called {
			if call == "PullImage" {
				pulls++
			}
		}
		if reason != st.wantReason || retry != st.wantRetry || pulls != st.wantPulls {
			t.Fatalf("step %d: reason %q retry %v pulls %d; want %q %v %d", i, reason, retry, pulls, st.wantReason, st.wantRetry, st.wantPulls)
		}
		if reason == ReasonImagePullBackOff && !strings.Contains(msg, "ErrImagePull: 401 Unauthorized") {
			t.Errorf("step %d: back-off message %q lacks the pull's error", i, msg)
		}
		if reason == ReasonErrImagePull && msg != `Failed to pull image "private.example/app:1": 401 Unauthorized` {
			t.Errorf("step %d: pull error message %q", i, msg)
		}
	}
}

// TestParallelPulls runs each case in a synctest bubble: after
// synctest.Wait every pull has either started or is waiting for a slot, so
// "no pull beyond the limit started" is exact.
func TestParallelPulls(t *testing.T) {
	const images = 5
	tests := []struct {
		name      string
		cfg       Config
		wantLimit int
	}{
		{"serializeImagePulls", Config{Serialize: true}, 1},
		{"maxParallelImagePulls 2", Config{MaxParallel: ptr.To[int32](2)}, 2},
		{"maxParallelImagePulls 1", Config{MaxParallel: ptr.To[int32](1)}, 1},
		{"unlimited", Config{}, images},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				svc := &fakeImages{present: map[string]bool{}, gate: make(chan struct{}), started: make(chan string, images)}
				cfg := tt.cfg
				cfg.Service = svc
				p := newPuller(t, cfg)
				errs := make(chan error, images)
				for i := 0; i < images; i++ {
					pod := &v1.Pod{}
					pod.UID = types.UID(fmt.Sprint("pod-", i))
					c := &v1.Container{Name: "c", Image: fmt.Sprintf("registry.example/app:%d", i), ImagePullPolicy: v1.PullIfNotPresent}
					go func() {
						_, err := p.EnsureImage(context.Background(), pod, c, nil)
						errs <- err
					}()
				}
				// As many pulls start as the limit allows, and no more.
				synctest.Wait()
				if n := len(svc.started); n != tt.wantLimit {
					t.Fatalf("%d pulls started, want %d", n, tt.wantLimit)
				}
				close(svc.gate)
				for i := 0; i < images; i++ {
					if err := <-errs; err != nil {
						t.Errorf("pull: %v", err)
					}
				}
				svc.mu.Lock()
				defer svc.mu.Unlock()
				if svc.calls != images || svc.maxInflight != tt.wantLimit {
					t.Errorf("%d pulls, %d at most at once; want %d, %d", svc.calls, svc.maxInflight, images, tt.wantLimit)
				}
			})
		})
	}
}

// Pods wanting the same image with the same credentials share one pull;
// other credentials pull on their own.
func TestSameImagePulledOnce(t *testing.T) {
	// In a synctest bubble: after synctest.Wait every EnsureImage has
	// joined its pull or returned, so the count of waiters is exact.
	synctest.Test(t, func(t *testing.T) {
		secrets := fakeSecrets{"ns/s": dockerConfigJSON("ns", "s", map[string]string{"registry.example": "u:p"})}
		svc := &fakeImages{present: map[string]bool{}, gate: make(chan struct{}), started: make(chan string, 10)}
		rec := record.NewFakeRecorder(100)
		p := newPuller(t, Config{Service: svc, Recorder: rec, Secrets: secrets})
		type result struct {
			ref string
			err error
		}
		results := make(chan result, 4)
		ensure := func(ctx context.Context, uid string, secret string) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: uid, UID: types.UID(uid)}}
			if secret != "" {
				pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: secret}}
			}
			c := &v1.Container{Name: "c", Image: "registry.example/app:1", ImagePullPolicy: v1.PullAlways}
			ref, err := p.EnsureImage(ctx, pod, c, nil)
			results <- result{ref, err}
		}
		waiters := func(n int) {
			t.Helper()
			synctest.Wait()
			p.mu.Lock()
			defer p.mu.Unlock()
			got := 0
			for _, f := range p.inflight {
				got += f.waiters
			}
			if got != n {
				t.Fatalf("%d waiters, want %d", got, n)
			}
		}
		// The first pod's sync is cancelled while the others wait: the pull
		// goes on for them.
		ctx, cancel := context.WithCancel(context.Background())
		go ensure(ctx, "a", "")
		waiters(1) // a's pull started
		go ensure(context.Background(), "b", "")
		go ensure(context.Background(), "c", "")
		go ensure(context.Background(), "d", "s") // with credentials: its own pull
		waiters(4)
		if n := len(svc.started); n != 2 {
			t.Fatalf("%d pulls started, want 2 (one anonymous shared by 3 pods, one with credentials)", n)
		}
		cancel()
		if r := <-results; !errors.Is(r.err, context.Canceled) && !strings.Contains(fmt.Sprint(r.err), "cancelled") {
			t.Fatalf("cancelled waiter: %v", r.err)
		}
		waiters(3)
		close(svc.gate)
		for i := 0; i < 3; i++ {
			if r := <-results; r.err != nil || r.ref != "id-registry.example/app:1" {
				t.Errorf("result %+v", r)
			}
		}
		synctest.Wait()
		svc.mu.Lock()
		calls := svc.calls
		svc.mu.Unlock()
		if calls != 2 {
			t.Errorf("%d pulls, want 2 (one anonymous shared by 3 pods, one with credentials)", calls)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.inflight) != 0 {
			t.Errorf("%d pulls left in flight", len(p.inflight))
		}
		// No back-off for the cancelled pod: its next sync pulls.
		if p.backoff.IsInBackOffSinceUpdate("a_registry.example/app:1", time.Now()) {
			t.Error("a cancelled sync put the pull in back-off")
		}
	})
}
