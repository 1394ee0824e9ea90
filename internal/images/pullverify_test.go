package images

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/images/pullmanager"
)

// TestEnsureSecretPulledImages: KubeletEnsureSecretPulledImages as
// upstream's image_credential_pulls node e2e test has it, with the real
// pull records on disk: an image pulled with a pull secret is only used
// without a pull by pods presenting that secret or the same credentials;
// others pull it again with theirs (the registry decides); Never hides
// whether it is there; images pulled anonymously are every pod's; the
// policy decides for preloaded images; the records survive a restart.
func TestEnsureSecretPulledImages(t *testing.T) {
	const private = "127.0.0.1:35001/private/busybox:1.36"
	const preloaded = "docker.io/library/preloaded:1"
	const public = "docker.io/library/busybox:1.36"
	withUID := func(s *v1.Secret, uid types.UID) *v1.Secret { s.UID = uid; return s }
	secrets := fakeSecrets{
		"ns/right": withUID(dockerConfigJSON("ns", "right", map[string]string{"127.0.0.1:35001": "user:secret"}), "uid-right"),
		"ns/copy":  withUID(dockerConfigJSON("ns", "copy", map[string]string{"127.0.0.1:35001": "user:secret"}), "uid-copy"),
		"ns/wrong": withUID(dockerConfigJSON("ns", "wrong", map[string]string{"127.0.0.1:35001": "user:nope"}), "uid-wrong"),
	}
	dir := t.TempDir()
	svc := &authImages{fakeImages: fakeImages{present: map[string]bool{preloaded: true}}}
	start := func(policy kubeletconfigv1beta1.ImagePullCredentialsVerificationPolicy) (*Puller, *record.FakeRecorder) {
		ctx := context.Background()
		pulls, err := pullmanager.New(ctx, pullmanager.Config{RootDir: dir, Images: svc, Policy: policy, MaxPods: 110,
			Clock: testingclock.NewFakeClock(time.Now())})
		if err != nil {
			t.Fatal(err)
		}
		rec := record.NewFakeRecorder(100)
		return newPuller(t, Config{Service: svc, Recorder: rec, Secrets: secrets, Pulls: pulls, Clock: testingclock.NewFakeClock(time.Now())}), rec
	}
	type step struct {
		pod        string
		image      string
		secrets    []string
		policy     v1.PullPolicy
		wantPull   bool   // PullImage called
		wantReason string // "" succeeds
		wantEvent  string
	}
	run := func(t *testing.T, p *Puller, rec *record.FakeRecorder, steps []step) {
		t.Helper()
		for _, s := range steps {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: s.pod, UID: types.UID("uid-" + s.pod)}}
			for _, name := range s.secrets {
				pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: name})
			}
			svc.mu.Lock()
			before := len(svc.auths)
			svc.mu.Unlock()
			_, err := p.EnsureImage(context.Background(), pod, &v1.Container{Name: "c", Image: s.image, ImagePullPolicy: s.policy}, nil)
			svc.mu.Lock()
			pulled := len(svc.auths) > before
			svc.mu.Unlock()
			var ie *Error
			switch {
			case s.wantReason == "" && err != nil:
				t.Errorf("%s: unexpected error %v", s.pod, err)
			case s.wantReason != "" && (!errors.As(err, &ie) || ie.Reason != s.wantReason):
				t.Errorf("%s: error %v, want reason %s", s.pod, err, s.wantReason)
			}
			if pulled != s.wantPull {
				t.Errorf("%s: pulled %v, want %v", s.pod, pulled, s.wantPull)
			}
			if s.wantEvent != "" {
				found := false
				for len(rec.Events) > 0 && !found {
					found = strings.Contains(<-rec.Events, s.wantEvent)
				}
				if !found {
					t.Errorf("%s: no event %q", s.pod, s.wantEvent)
				}
			}
			for len(rec.Events) > 0 {
				<-rec.Events
			}
		}
	}
	ifNot, never := v1.PullIfNotPresent, v1.PullNever
	p, rec := start(kubeletconfigv1beta1.NeverVerifyPreloadedImages)
	run(t, p, rec, []step{
		{pod: "a", image: private, secrets: []string{"right"}, policy: ifNot, wantPull: true},
		{pod: "b", image: private, policy: ifNot, wantPull: true, wantReason: ReasonErrImagePull, wantEvent: "401 Unauthorized"},
		{pod: "w", image: private, secrets: []string{"wrong"}, policy: ifNot, wantPull: true, wantReason: ReasonErrImagePull},
		{pod: "c", image: private, secrets: []string{"right"}, policy: ifNot,
			wantEvent: `Container image "` + private + `" already present on machine and can be accessed by the pod`},
		{pod: "d", image: private, secrets: []string{"copy"}, policy: ifNot},
		{pod: "e", image: private, policy: never, wantReason: ReasonErrImageNeverPull,
			wantEvent: `Container image "` + private + `" is not present with pull policy of Never`},
		{pod: "f", image: preloaded, policy: ifNot},
		{pod: "g", image: public, policy: ifNot, wantPull: true},
		{pod: "h", image: public, policy: ifNot},
	})
	// A restart: the records are on disk.
	p, rec = start(kubeletconfigv1beta1.NeverVerifyPreloadedImages)
	run(t, p, rec, []step{
		{pod: "b2", image: private, policy: ifNot, wantPull: true, wantReason: ReasonErrImagePull},
		{pod: "c2", image: private, secrets: []string{"right"}, policy: ifNot},
		{pod: "h2", image: public, policy: ifNot},
	})
	// AlwaysVerify: a preloaded image is pulled again too.
	p, rec = start(kubeletconfigv1beta1.AlwaysVerify)
	run(t, p, rec, []step{
		{pod: "f2", image: preloaded, policy: ifNot, wantPull: true},
		{pod: "f3", image: preloaded, policy: ifNot},
	})
	// NeverVerify: whatever was pulled with whichever credentials.
	p, rec = start(kubeletconfigv1beta1.NeverVerify)
	run(t, p, rec, []step{{pod: "b3", image: private, policy: ifNot}})
}
