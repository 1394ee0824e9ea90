package kuberuntime

import (
	"testing"

	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/nodelet/nodelet/internal/ctortest"
)

func TestNew(t *testing.T) {
	rt := critest.NewFakeRuntimeService()
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no runtime", Config: Config{Images: presentImages{}}, WantErr: "Config.Runtime is required"},
		{Name: "no images", Config: Config{Runtime: rt}, WantErr: "Config.Images is required"},
		{Name: "a nil clock is the real one", Config: Config{Runtime: rt, Images: presentImages{}}},
	}, func(t *testing.T, m *Manager) {
		ctortest.RealClock(t, m.clock)
	})
}
