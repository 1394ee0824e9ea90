package apiserver

import (
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/internal/ctortest"
)

func TestNew(t *testing.T) {
	client := fake.NewClientset()
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no client", Config: Config{NodeName: "n1"}, WantErr: "Config.Client is required"},
		{Name: "no node name", Config: Config{Client: client}, WantErr: "Config.NodeName is required"},
		{Name: "complete", Config: Config{Client: client, NodeName: "n1"}},
	}, func(t *testing.T, s *Source) {
		if s.Lister() == nil {
			t.Error("no lister")
		}
	})
}
