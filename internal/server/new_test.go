package server

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	critesting "k8s.io/cri-api/pkg/apis/testing"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodelet/nodelet/internal/ctortest"
)

// noPods is a Pods without any.
type noPods struct{}

func (noPods) Pods() []*v1.Pod                          { return nil }
func (noPods) PodByName(string, string) (*v1.Pod, bool) { return nil, false }

func TestNew(t *testing.T) {
	kc := &kubeletv1beta1.KubeletConfiguration{Authorization: kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow}}
	rs := critesting.NewFakeRuntimeService()
	pr := fakePodRuntime{}
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no kubelet configuration", Config: Config{Pods: noPods{}, Runtime: rs, PodRuntime: pr}, WantErr: "Config.Kubelet is required"},
		{Name: "no pods", Config: Config{Kubelet: kc, Runtime: rs, PodRuntime: pr}, WantErr: "Config.Pods is required"},
		{Name: "no runtime", Config: Config{Kubelet: kc, Pods: noPods{}, PodRuntime: pr}, WantErr: "Config.Runtime is required"},
		{Name: "no pod runtime", Config: Config{Kubelet: kc, Pods: noPods{}, Runtime: rs}, WantErr: "Config.PodRuntime is required"},
		{Name: "no authorization mode", Config: Config{Kubelet: &kubeletv1beta1.KubeletConfiguration{}, Pods: noPods{}, Runtime: rs, PodRuntime: pr}, WantErr: `authorization.mode "" is not supported`},
		{Name: "standalone, a nil clock is the real one", Config: Config{Kubelet: kc, Pods: noPods{}, Runtime: rs, PodRuntime: pr}},
	}, func(t *testing.T, s *Server) {
		ctortest.RealClock(t, s.clock)
		if s.auth == nil {
			t.Error("no authentication and authorization set up")
		}
		if s.resource == nil || s.cadvisor == nil {
			t.Error("no registries for /metrics/resource and /metrics/cadvisor")
		}
	})
}
