package metrics

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-logr/logr/funcr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

func TestQuietDropsOnlyCanceledCalls(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		logged bool
	}{
		{"context canceled", context.Canceled, false},
		{"wrapped context canceled", fmt.Errorf("list containers: %w", context.Canceled), false},
		{"gRPC Canceled", status.Error(codes.Canceled, "context canceled"), false},
		{"deadline exceeded", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true},
		{"runtime failure", status.Error(codes.Unknown, "failed to create containerd task"), true},
		{"plain error", errors.New("boom"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var lines []string
			base := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
			ctx := quiet(klog.NewContext(context.Background(), base))
			// What the CRI client does: the logger from the context, with
			// values added on the way.
			klog.FromContext(ctx).WithValues("containerID", "c1").WithName("cri").Error(tc.err, "ListContainers from runtime service failed")
			if got := len(lines) > 0; got != tc.logged {
				t.Errorf("logged = %v (%q), want %v", got, lines, tc.logged)
			}
		})
	}
}
