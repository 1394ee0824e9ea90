package images

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/credentialprovider"
	"github.com/nodelet/nodelet/internal/images/pullmanager"
	"github.com/nodelet/nodelet/internal/podspec"
)

// Waiting reasons a failed EnsureImage reports, as upstream.
const (
	ReasonErrImagePull      = "ErrImagePull"
	ReasonImagePullBackOff  = "ImagePullBackOff"
	ReasonErrImageNeverPull = "ErrImageNeverPull"
	ReasonInvalidImageName  = "InvalidImageName"
)

// Error is a failure to make an image present, with the container waiting
// reason it maps to.
type Error struct {
	Reason  string
	Message string
	// RetryAfter is when the pod is worth syncing again: shortly after a
	// failed pull (so that its status moves from ErrImagePull to
	// ImagePullBackOff), at the end of the back-off during one.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Reason + ": " + e.Message }

// Backoff limits of failed pulls, as upstream.
const (
	BackoffInitial = 10 * time.Second
	BackoffMax     = 300 * time.Second
)

// ReportBackOffAfter is how long after a failed pull the pod is synced again
// to report ImagePullBackOff (the upstream kubelet gets there through the
// PLEG event of the sandbox it just created, about a second later).
const ReportBackOffAfter = time.Second

// Config configures a Puller.
type Config struct {
	// Service is the CRI image service images are pulled through.
	Service internalapi.ImageManagerService
	// Recorder gets the pull events (Pulling, Pulled, Failed, BackOff...);
	// nil records none.
	Recorder record.EventRecorder
	// Clock times pulls and their back-off (the real clock when nil).
	Clock clock.Clock
	// Serialize pulls one image at a time (serializeImagePulls).
	Serialize bool
	// MaxParallel limits the pulls in flight when not Serialize
	// (maxParallelImagePulls); nil or less than 1 is no limit.
	MaxParallel *int32
	// Secrets reads imagePullSecrets; nil when there is no API server
	// (every pull secret is then missing).
	Secrets SecretGetter
	// Providers are the image credential provider plugins
	// (--image-credential-provider-config); nil: none.
	Providers CredentialProviders
	// Pulls are the image pull records of KubeletEnsureSecretPulledImages
	// (pullmanager.Manager): whether a pod may use an image already on the
	// node with its credentials; nil: any pod may (the gate off).
	Pulls PullRecords
}

// PullRecords keep which credentials images were pulled with
// (pullmanager.Manager).
type PullRecords interface {
	RecordPullIntent(ctx context.Context, image string) error
	RecordImagePulled(ctx context.Context, image, imageRef string, credentials *kubeletconfigv1beta1.ImagePullCredentials)
	RecordImagePullFailed(ctx context.Context, image string)
	MustAttemptImagePull(ctx context.Context, image, imageRef string, getPodCredentials pullmanager.GetPodCredentials) (bool, error)
}

// CredentialProviders give the credentials of the image credential
// provider plugins (credentialprovider.Providers).
type CredentialProviders interface {
	Lookup(ctx context.Context, image string, pod credentialprovider.Pod) ([]credentialprovider.Result, []error)
}

// Puller makes images present. It is safe for concurrent use.
type Puller struct {
	svc       internalapi.ImageManagerService
	recorder  record.EventRecorder
	clock     clock.Clock
	secrets   SecretGetter
	providers CredentialProviders
	pulls     PullRecords
	backoff   *flowcontrol.Backoff
	// tokens bounds the pulls in flight; nil: no bound.
	tokens chan struct{}

	mu sync.Mutex
	// inflight are the pulls going on, by image and credentials: pods
	// wanting the same image with the same credentials share one pull.
	inflight map[string]*flight
	// failures are the last failed pull per back-off key (pod and image),
	// for the ImagePullBackOff message and the time left.
	failures map[string]failure
}

type failure struct {
	at  time.Time
	msg string
}

// flight is one pull in progress, shared by its waiters.
type flight struct {
	done    chan struct{}
	waiters int
	cancel  context.CancelFunc
	// Set before done is closed.
	ref        string
	size       uint64
	err        error
	duration   time.Duration // the pull alone, without waiting for a slot
	credential *Credential   // the credential that worked, if any
}

// New returns a Puller for cfg. It fails when cfg has no Service.
func New(cfg Config) (*Puller, error) {
	if cfg.Service == nil {
		return nil, errors.New("images: Config.Service is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	p := &Puller{
		svc:       cfg.Service,
		recorder:  cfg.Recorder,
		clock:     cfg.Clock,
		secrets:   cfg.Secrets,
		providers: cfg.Providers,
		pulls:     cfg.Pulls,
		backoff:   flowcontrol.NewFakeBackOff(BackoffInitial, BackoffMax, cfg.Clock),
		inflight:  map[string]*flight{},
		failures:  map[string]failure{},
	}
	switch {
	case cfg.Serialize:
		p.tokens = make(chan struct{}, 1)
	case cfg.MaxParallel != nil && *cfg.MaxParallel >= 1:
		p.tokens = make(chan struct{}, *cfg.MaxParallel)
	}
	return p, nil
}

// EnsureImage returns the image reference (its ID) of c's image, pulling it
// when c's pull policy asks, with the credentials of the pod's
// imagePullSecrets that match the image's registry. A failure is an *Error.
func (p *Puller) EnsureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	return p.ensure(ctx, pod, request{image: c.Image, policy: c.ImagePullPolicy, c: c}, sandbox)
}

// EnsureVolumeImage is EnsureImage for the image of an image volume, with
// the volume's pull policy; its events are the pod's, as upstream's.
func (p *Puller) EnsureVolumeImage(ctx context.Context, pod *v1.Pod, src *v1.ImageVolumeSource, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	return p.ensure(ctx, pod, request{image: src.Reference, policy: src.PullPolicy}, sandbox)
}

// request is one image a pod needs: a container's or an image volume's.
type request struct {
	image  string // as the pod's spec names it
	policy v1.PullPolicy
	// c gets the events; nil: the pod (an image volume).
	c *v1.Container
}

func (p *Puller) ensure(ctx context.Context, pod *v1.Pod, r request, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	c := r.c
	image, err := NormalizeImage(r.image)
	if err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: %v", r.image, err)
		p.event(pod, c, v1.EventTypeWarning, "InspectFailed", msg)
		return "", &Error{Reason: ReasonInvalidImageName, Message: msg, RetryAfter: BackoffInitial}
	}
	spec := &runtimeapi.ImageSpec{Image: image, Annotations: pod.Annotations}
	ref := ""
	if r.policy != v1.PullAlways {
		st, err := p.svc.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
		if err != nil {
			msg := fmt.Sprintf("Failed to inspect image %q: %v", image, err)
			p.event(pod, c, v1.EventTypeWarning, "InspectFailed", msg)
			return "", &Error{Reason: ReasonErrImagePull, Message: msg, RetryAfter: BackoffInitial}
		}
		if st.GetImage() != nil {
			ref = st.GetImage().GetId()
		}
	}
	// The pod's credentials for the image, looked up once and only when
	// needed: to verify it may use an image on the node, or to pull.
	lookup := sync.OnceValue(func() credentialLookup { return p.lookupCredentials(ctx, pod, c, image) })
	if ref != "" {
		if p.pulls == nil {
			p.event(pod, c, v1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", r.image))
			return ref, nil
		}
		// KubeletEnsureSecretPulledImages: an image on the node is the
		// pod's if the policy says so or the pod presents credentials it
		// was pulled with; else it is pulled again with the pod's own
		// credentials (which the registry checks).
		must, err := p.pulls.MustAttemptImagePull(ctx, r.image, ref, lookup().recordCredentials)
		if err != nil {
			msg := fmt.Sprintf("Failed to verify the pod's credentials for image %q: %v", r.image, err)
			p.event(pod, c, v1.EventTypeWarning, "Failed", msg)
			return "", &Error{Reason: ReasonErrImagePull, Message: msg, RetryAfter: BackoffInitial}
		}
		if !must {
			p.event(pod, c, v1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine and can be accessed by the pod", r.image))
			return ref, nil
		}
	}
	if r.policy == v1.PullNever {
		// Not on the node, or not the pod's to use: as upstream, the
		// same answer, not to reveal which.
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", r.image)
		p.event(pod, c, v1.EventTypeWarning, ReasonErrImageNeverPull, msg)
		return "", &Error{Reason: ReasonErrImageNeverPull, Message: msg, RetryAfter: BackoffInitial}
	}

	if p.pulls != nil {
		// As upstream: an intent before the pull (a pull interrupted by a
		// restart is known), a record of its credentials after it.
		if err := p.pulls.RecordPullIntent(ctx, r.image); err != nil {
			msg := fmt.Sprintf("Failed to record image pull intent for container image %q: %v", r.image, err)
			return "", &Error{Reason: ReasonErrImagePull, Message: msg, RetryAfter: BackoffInitial}
		}
	}
	ref, cred, err := p.pullFor(ctx, pod, r, image, spec, sandbox, lookup)
	if p.pulls != nil {
		if err == nil {
			p.pulls.RecordImagePulled(ctx, r.image, ref, recordOf(cred))
		} else {
			p.pulls.RecordImagePullFailed(ctx, r.image)
		}
	}
	return ref, err
}

// pullFor pulls the image for the pod, unless it is in back-off, and
// returns its reference and the credential that worked (nil: anonymous).
func (p *Puller) pullFor(ctx context.Context, pod *v1.Pod, r request, image string, spec *runtimeapi.ImageSpec,
	sandbox *runtimeapi.PodSandboxConfig, lookup func() credentialLookup) (string, *Credential, error) {
	c := r.c
	key := string(pod.UID) + "_" + image
	now := p.clock.Now()
	if p.backoff.IsInBackOffSinceUpdate(key, now) {
		p.mu.Lock()
		f, ok := p.failures[key]
		p.mu.Unlock()
		if ok && now.Sub(f.at) < ReportBackOffAfter {
			// A sync right after the failed pull (the sandbox's PLEG event,
			// the pod's own status update) still reports the pull's error,
			// so ErrImagePull is what the API shows for that second.
			return "", nil, &Error{Reason: ReasonErrImagePull, Message: fmt.Sprintf("Failed to pull image %q: %s", r.image, f.msg),
				RetryAfter: ReportBackOffAfter - now.Sub(f.at)}
		}
		msg := fmt.Sprintf("Back-off pulling image %q", r.image)
		p.event(pod, c, v1.EventTypeNormal, "BackOff", msg)
		left := BackoffInitial
		p.mu.Lock()
		if f, ok := p.failures[key]; ok {
			// As upstream: the message carries the error of the last pull.
			msg = fmt.Sprintf("%s: %s: %s", msg, ReasonErrImagePull, f.msg)
			left = p.backoff.Get(key) - now.Sub(f.at)
		}
		p.mu.Unlock()
		return "", nil, &Error{Reason: ReasonImagePullBackOff, Message: msg, RetryAfter: max(left, 100*time.Millisecond)}
	}

	cl := lookup()
	if cl.err != nil {
		msg := fmt.Sprintf("Failed to read the image pull secrets of the pod: %v", cl.err)
		p.event(pod, c, v1.EventTypeWarning, "Failed", msg)
		return "", nil, &Error{Reason: ReasonErrImagePull, Message: msg, RetryAfter: BackoffInitial}
	}
	creds, missing, providerErrs := cl.creds, cl.missing, cl.providerErrs

	p.event(pod, c, v1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", r.image))
	start := p.clock.Now()
	f, err := p.pull(ctx, spec, creds, sandbox)
	if err == nil {
		err = f.err
	}
	if err != nil && ctx.Err() != nil {
		// The pod's sync was cancelled (the pod is going away): no back-off.
		return "", nil, &Error{Reason: ReasonErrImagePull, Message: fmt.Sprintf("Pulling image %q cancelled: %v", r.image, ctx.Err()), RetryAfter: BackoffInitial}
	}
	if err != nil {
		failedAt := p.clock.Now()
		p.backoff.Next(key, failedAt)
		p.mu.Lock()
		p.failures[key] = failure{at: failedAt, msg: err.Error()}
		p.mu.Unlock()
		msg := fmt.Sprintf("Failed to pull image %q: %v", r.image, err)
		if len(providerErrs) > 0 {
			msg += " (" + errors.Join(providerErrs...).Error() + ")"
		}
		p.event(pod, c, v1.EventTypeWarning, "Failed", msg)
		if len(missing) > 0 && p.recorder != nil {
			p.recorder.Eventf(pod, v1.EventTypeWarning, "FailedToRetrieveImagePullSecret",
				"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(missing, ", "))
		}
		return "", nil, &Error{Reason: ReasonErrImagePull, Message: msg, RetryAfter: min(ReportBackOffAfter, p.backoff.Get(key))}
	}
	p.backoff.Reset(key)
	p.mu.Lock()
	delete(p.failures, key)
	p.mu.Unlock()
	waited := p.clock.Since(start)
	secret, provider := "", ""
	if f.credential != nil {
		secret, provider = f.credential.Secret, f.credential.Provider
	}
	klog.FromContext(ctx).V(2).Info("Pulled image", "pod", klog.KObj(pod), "container", containerName(c), "image", image,
		"pullTime", f.duration, "withWaiting", waited, "pullSecret", secret, "credentialProvider", provider)
	p.event(pod, c, v1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q in %v (%v including waiting). Image size: %d bytes.",
		r.image, f.duration.Round(time.Millisecond), waited.Round(time.Millisecond), f.size))
	return f.ref, f.credential, nil
}

// credentialLookup is what lookupCredentials found.
type credentialLookup struct {
	creds []Credential
	// missing names the pull secrets that could not be read.
	missing []string
	// providerErrs are the credential providers that failed.
	providerErrs []error
	err          error
}

// lookupCredentials finds the pod's credentials for image: its pull
// secrets', then the credential providers' (whose failures are Warning
// events).
func (p *Puller) lookupCredentials(ctx context.Context, pod *v1.Pod, c *v1.Container, image string) credentialLookup {
	var cl credentialLookup
	cl.creds, cl.missing, cl.err = p.podCredentials(ctx, pod, image)
	if cl.err != nil {
		return cl
	}
	if len(cl.missing) > 0 {
		klog.FromContext(ctx).Info("Unable to retrieve pull secret, the image pull may not succeed", "pod", klog.KObj(pod), "secrets", cl.missing)
	}
	provided, providerErrs := p.providerCredentials(ctx, pod, image)
	for _, err := range providerErrs {
		p.event(pod, c, v1.EventTypeWarning, ReasonCredentialProviderFailed, err.Error())
	}
	cl.creds, cl.providerErrs = append(cl.creds, provided...), providerErrs
	return cl
}

// recordCredentials are the credentials an image pull record compares
// (pullmanager.GetPodCredentials): the pod's pull secrets, and the first
// service account a provider gave credentials for (as upstream, the
// audience is not told apart). The node's credentials are not the pod's.
func (cl credentialLookup) recordCredentials() ([]kubeletconfigv1beta1.ImagePullSecret, *kubeletconfigv1beta1.ImagePullServiceAccount, error) {
	if cl.err != nil {
		return nil, nil, cl.err
	}
	var secrets []kubeletconfigv1beta1.ImagePullSecret
	var sa *kubeletconfigv1beta1.ImagePullServiceAccount
	for _, c := range cl.creds {
		switch {
		case c.secret != nil:
			secrets = append(secrets, *c.secret)
		case c.serviceAccount != nil && sa == nil:
			sa = c.serviceAccount
		}
	}
	return secrets, sa, nil
}

// recordOf is the record of a pull with cred, upstream's
// trackedToImagePullCreds: anonymous or with the node's credentials,
// every pod of the node may use the image.
func recordOf(cred *Credential) *kubeletconfigv1beta1.ImagePullCredentials {
	switch {
	case cred != nil && cred.secret != nil:
		return &kubeletconfigv1beta1.ImagePullCredentials{KubernetesSecrets: []kubeletconfigv1beta1.ImagePullSecret{*cred.secret}}
	case cred != nil && cred.serviceAccount != nil:
		return &kubeletconfigv1beta1.ImagePullCredentials{KubernetesServiceAccounts: []kubeletconfigv1beta1.ImagePullServiceAccount{*cred.serviceAccount}}
	}
	return &kubeletconfigv1beta1.ImagePullCredentials{NodePodsAccessible: true}
}

// pull joins the pull of spec with creds in flight, or starts it, and waits
// for it. A waiter that gives up (its context ends) leaves the pull to the
// others; the last one to leave cancels it.
func (p *Puller) pull(ctx context.Context, spec *runtimeapi.ImageSpec, creds []Credential, sandbox *runtimeapi.PodSandboxConfig) (*flight, error) {
	fk := spec.Image + "\x00" + credentialsKey(creds)
	p.mu.Lock()
	f, ok := p.inflight[fk]
	if !ok {
		// The pull outlives the pod that started it while others wait.
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &flight{done: make(chan struct{}), cancel: cancel}
		p.inflight[fk] = f
		go p.run(fctx, fk, f, spec, creds, sandbox)
	}
	f.waiters++
	p.mu.Unlock()

	select {
	case <-f.done:
		return f, nil
	case <-ctx.Done():
		p.mu.Lock()
		f.waiters--
		if f.waiters == 0 {
			f.cancel()
			if p.inflight[fk] == f {
				delete(p.inflight, fk)
			}
		}
		p.mu.Unlock()
		return nil, ctx.Err()
	}
}

func (p *Puller) run(ctx context.Context, fk string, f *flight, spec *runtimeapi.ImageSpec, creds []Credential, sandbox *runtimeapi.PodSandboxConfig) {
	defer func() {
		f.cancel()
		p.mu.Lock()
		if p.inflight[fk] == f {
			delete(p.inflight, fk)
		}
		p.mu.Unlock()
		close(f.done)
	}()
	if p.tokens != nil {
		select {
		case p.tokens <- struct{}{}:
			defer func() { <-p.tokens }()
		case <-ctx.Done():
			f.err = ctx.Err()
			return
		}
	}
	start := p.clock.Now()
	f.ref, f.credential, f.err = p.pullWithCredentials(ctx, spec, creds, sandbox)
	f.duration = p.clock.Since(start)
	if f.err == nil {
		// The size for the Pulled event, best effort, as upstream.
		if st, err := p.svc.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: spec.Image}, false); err == nil && st.GetImage() != nil {
			f.size = st.GetImage().GetSize()
		}
	}
}

// pullWithCredentials pulls anonymously when there are no credentials, else
// tries each in turn until one works; as upstream, it does not fall back to
// an anonymous pull when every credential failed.
func (p *Puller) pullWithCredentials(ctx context.Context, spec *runtimeapi.ImageSpec, creds []Credential, sandbox *runtimeapi.PodSandboxConfig) (string, *Credential, error) {
	if len(creds) == 0 {
		ref, err := p.svc.PullImage(ctx, spec, nil, sandbox)
		return ref, nil, err
	}
	var errs []error
	for i := range creds {
		ref, err := p.svc.PullImage(ctx, spec, creds[i].Auth, sandbox)
		if err == nil {
			return ref, &creds[i], nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 1 {
		return "", nil, errs[0]
	}
	return "", nil, utilerrors.NewAggregate(errs)
}

// Forget drops the back-off state of a pod that is gone.
func (p *Puller) Forget(pod *v1.Pod) {
	var refs []string
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			refs = append(refs, c.Image)
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.Image != nil {
			refs = append(refs, v.Image.Reference)
		}
	}
	for _, ref := range refs {
		if image, err := NormalizeImage(ref); err == nil {
			key := string(pod.UID) + "_" + image
			p.backoff.DeleteEntry(key)
			p.mu.Lock()
			delete(p.failures, key)
			p.mu.Unlock()
		}
	}
}

// containerName is c's name for the log, "" for an image volume's pull.
func containerName(c *v1.Container) string {
	if c == nil {
		return ""
	}
	return c.Name
}

func (p *Puller) event(pod *v1.Pod, c *v1.Container, typ, reason, msg string) {
	if p.recorder == nil {
		return
	}
	p.recorder.Event(podspec.ContainerRef(pod, c), typ, reason, msg)
}

// NormalizeImage adds the default tag "latest" to an image without tag or
// digest, as upstream does before asking the runtime.
func NormalizeImage(image string) (string, error) {
	if image == "" || strings.TrimSpace(image) != image || strings.ContainsAny(image, " \t\n") {
		return "", errors.New("invalid image name")
	}
	if strings.Contains(image, "@") {
		return image, nil
	}
	last := image[strings.LastIndex(image, "/")+1:]
	if !strings.Contains(last, ":") {
		return image + ":latest", nil
	}
	return image, nil
}
