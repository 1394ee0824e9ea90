package apiserver

import (
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

func TestNew(t *testing.T) {
	client := fake.NewClientset()
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"no client", Config{NodeName: "n1"}, "Config.Client is required"},
		{"no node name", Config{Client: client}, "Config.NodeName is required"},
		{"complete", Config{Client: client, NodeName: "n1"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Lister() == nil {
				t.Error("no lister")
			}
		})
	}
}
