package mirror

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func TestNew(t *testing.T) {
	client := fake.NewClientset()
	lister := corelisters.NewPodLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	node := func() *v1.Node { return nil }
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"no client", Config{Lister: lister, Node: node}, "Config.Client is required"},
		{"no lister", Config{Client: client, Node: node}, "Config.Lister is required"},
		{"no node", Config{Client: client, Lister: lister}, "Config.Node is required"},
		{"complete", Config{Client: client, Lister: lister, Node: node}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
