package mirror

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodelet/nodelet/internal/ctortest"
)

func TestNew(t *testing.T) {
	client := fake.NewClientset()
	lister := corelisters.NewPodLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	node := func() *v1.Node { return nil }
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no client", Config: Config{Lister: lister, Node: node}, WantErr: "Config.Client is required"},
		{Name: "no lister", Config: Config{Client: client, Node: node}, WantErr: "Config.Lister is required"},
		{Name: "no node", Config: Config{Client: client, Lister: lister}, WantErr: "Config.Node is required"},
		{Name: "complete", Config: Config{Client: client, Lister: lister, Node: node}},
	}, nil)
}
