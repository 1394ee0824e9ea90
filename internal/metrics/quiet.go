package metrics

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// quiet gives a CRI call a logger that drops errors of calls canceled by
// their caller. The CRI client logs every failed call as an error; a pod
// worker cancels its runtime calls when the pod is deleted or its sync is
// superseded, which is nodelet's decision, not a runtime failure (a mass
// deletion logged one "ListContainers ... context canceled" error per
// pod). Deadlines and every other error are still logged.
func quiet(ctx context.Context) context.Context {
	l := klog.FromContext(ctx)
	sink := l.GetSink()
	if sink == nil {
		return ctx
	}
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1) // the caller's line, not this wrapper's
	}
	return klog.NewContext(ctx, l.WithSink(canceledFilter{sink}))
}

// canceledFilter is a logr.LogSink that drops errors of canceled calls.
type canceledFilter struct{ logr.LogSink }

func (f canceledFilter) Error(err error, msg string, kv ...any) {
	if errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
		return
	}
	f.LogSink.Error(err, msg, kv...)
}

func (f canceledFilter) WithValues(kv ...any) logr.LogSink {
	return canceledFilter{f.LogSink.WithValues(kv...)}
}

func (f canceledFilter) WithName(name string) logr.LogSink {
	return canceledFilter{f.LogSink.WithName(name)}
}
