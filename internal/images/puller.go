package images

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

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
}

func (e *Error) Error() string { return e.Reason + ": " + e.Message }

// Backoff limits of failed pulls, as upstream.
const (
	BackoffInitial = 10 * time.Second
	BackoffMax     = 300 * time.Second
)

// Puller makes images present. It is safe for concurrent use.
type Puller struct {
	svc       internalapi.ImageManagerService
	recorder  record.EventRecorder
	clock     clock.Clock
	backoff   *flowcontrol.Backoff
	serialize sync.Mutex
	serial    bool
}

// NewPuller returns a Puller. serialize makes pulls happen one at a time.
func NewPuller(svc internalapi.ImageManagerService, recorder record.EventRecorder, clk clock.Clock, serialize bool) *Puller {
	return &Puller{
		svc:      svc,
		recorder: recorder,
		clock:    clk,
		backoff:  flowcontrol.NewFakeBackOff(BackoffInitial, BackoffMax, clk),
		serial:   serialize,
	}
}

// EnsureImage returns the image reference (its ID) of c's image, pulling it
// when c's pull policy asks. A failure is an *Error.
func (p *Puller) EnsureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	image, err := NormalizeImage(c.Image)
	if err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: %v", c.Image, err)
		p.event(pod, c, v1.EventTypeWarning, "InspectFailed", msg)
		return "", &Error{Reason: ReasonInvalidImageName, Message: msg}
	}
	spec := &runtimeapi.ImageSpec{Image: image}
	ref := ""
	if c.ImagePullPolicy != v1.PullAlways {
		st, err := p.svc.ImageStatus(ctx, spec, false)
		if err != nil {
			msg := fmt.Sprintf("Failed to inspect image %q: %v", image, err)
			p.event(pod, c, v1.EventTypeWarning, "InspectFailed", msg)
			return "", &Error{Reason: ReasonErrImagePull, Message: msg}
		}
		if st.GetImage() != nil {
			ref = st.GetImage().GetId()
		}
	}
	if ref != "" {
		p.event(pod, c, v1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image))
		return ref, nil
	}
	if c.ImagePullPolicy == v1.PullNever {
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
		p.event(pod, c, v1.EventTypeWarning, ReasonErrImageNeverPull, msg)
		return "", &Error{Reason: ReasonErrImageNeverPull, Message: msg}
	}

	key := string(pod.UID) + "_" + image
	if p.backoff.IsInBackOffSinceUpdate(key, p.clock.Now()) {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		p.event(pod, c, v1.EventTypeNormal, "BackOff", msg)
		return "", &Error{Reason: ReasonImagePullBackOff, Message: msg}
	}
	p.event(pod, c, v1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", c.Image))
	start := p.clock.Now()
	if p.serial {
		p.serialize.Lock()
	}
	pulled := p.clock.Now()
	ref, err = p.svc.PullImage(ctx, spec, nil, sandbox)
	if p.serial {
		p.serialize.Unlock()
	}
	if err != nil {
		p.backoff.Next(key, p.clock.Now())
		msg := fmt.Sprintf("Failed to pull image %q: %v", c.Image, err)
		p.event(pod, c, v1.EventTypeWarning, "Failed", msg)
		return "", &Error{Reason: ReasonErrImagePull, Message: msg}
	}
	p.backoff.Reset(key)
	p.event(pod, c, v1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q in %v (%v including waiting)",
		c.Image, p.clock.Since(pulled).Round(time.Millisecond), p.clock.Since(start).Round(time.Millisecond)))
	return ref, nil
}

// Forget drops the back-off state of a pod that is gone.
func (p *Puller) Forget(pod *v1.Pod) {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if image, err := NormalizeImage(c.Image); err == nil {
				p.backoff.DeleteEntry(string(pod.UID) + "_" + image)
			}
		}
	}
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
