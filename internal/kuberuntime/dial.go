package kuberuntime

import (
	"context"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DialConfig is where the runtime is and how long to wait for it.
type DialConfig struct {
	// RuntimeEndpoint and ImageEndpoint are the CRI sockets
	// (containerRuntimeEndpoint, imageServiceEndpoint).
	RuntimeEndpoint, ImageEndpoint string
	// Timeout is each request's (runtimeRequestTimeout).
	Timeout time.Duration
	// Clock times the retries (the real clock when nil).
	Clock clock.Clock
}

// Dial connects to the CRI runtime and image services, retrying (1 s
// doubling to 30 s) until the runtime answers Version or ctx is done: an
// unreachable runtime is logged and waited for, never fatal. It returns the
// runtime's version answer too.
func Dial(ctx context.Context, cfg DialConfig) (internalapi.RuntimeService, internalapi.ImageManagerService, *runtimeapi.VersionResponse, error) {
	logger := klog.FromContext(ctx)
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.ImageEndpoint == "" {
		cfg.ImageEndpoint = cfg.RuntimeEndpoint
	}
	delay := time.Second
	for {
		rs, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(cfg.RuntimeEndpoint).
			WithConnectionTimeout(cfg.Timeout).WithTracerProvider(nil).Build(ctx)
		if err == nil {
			var is internalapi.ImageManagerService
			is, err = remote.NewRemoteImageServiceBuilder().WithEndpoint(cfg.ImageEndpoint).
				WithConnectionTimeout(cfg.Timeout).WithTracerProvider(nil).Build(ctx)
			if err == nil {
				var v *runtimeapi.VersionResponse
				if v, err = rs.Version(ctx, "v1"); err == nil {
					logger.Info("Connected to the container runtime", "runtime", v.RuntimeName, "version", v.RuntimeVersion, "criVersion", v.RuntimeApiVersion)
					return rs, is, v, nil
				}
			}
		}
		logger.Error(err, "Cannot reach the container runtime; retrying", "endpoint", cfg.RuntimeEndpoint, "retryIn", delay)
		select {
		case <-ctx.Done():
			return nil, nil, nil, ctx.Err()
		case <-cfg.Clock.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}
