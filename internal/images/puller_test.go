package images

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testingclock "k8s.io/utils/clock/testing"
)

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
			p := NewPuller(svc, nil, testingclock.NewFakeClock(time.Now()), true)
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
	p := NewPuller(svc, nil, clk, false)
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
	if r := reason(); r != ReasonImagePullBackOff {
		t.Fatalf("retry inside the back-off: %q, want ImagePullBackOff", r)
	}
	clk.Step(BackoffInitial)
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
