package kuberuntime

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	// TracerProvider gets a span per CRI call (the CRI client's gRPC
	// instrumentation), as upstream's; nil: none.
	TracerProvider trace.TracerProvider
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
			WithConnectionTimeout(cfg.Timeout).WithTracerProvider(cfg.TracerProvider).Build(ctx)
		if err == nil {
			var is internalapi.ImageManagerService
			is, err = remote.NewRemoteImageServiceBuilder().WithEndpoint(cfg.ImageEndpoint).
				WithConnectionTimeout(cfg.Timeout).WithTracerProvider(cfg.TracerProvider).Build(ctx)
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

// CRILosingSupportVersion is the Kubernetes version that drops runtimes
// without RuntimeConfig (kubelet_cri_losing_support's label, as upstream
// v1.37).
const CRILosingSupportVersion = "1.38.0"

// CgroupDriverFromRuntime is the cgroup driver to use, as upstream's
// getCgroupDriverFromCRI (KEP-4033): the one the runtime reports in its
// RuntimeConfig answer; the configured one when the runtime does not
// implement RuntimeConfig (unsupported is then true: the runtime loses
// support in CRILosingSupportVersion) or reports no Linux configuration. A
// driver it reports that is neither systemd nor cgroupfs is an error, as is
// another error from the runtime (err is RuntimeConfig's).
func CgroupDriverFromRuntime(configured string, resp *runtimeapi.RuntimeConfigResponse, err error) (driver string, unsupported bool, _ error) {
	if err != nil {
		if status.Code(err) == codes.Unimplemented {
			return configured, true, nil
		}
		return configured, false, fmt.Errorf("RuntimeConfig from the container runtime: %w", err)
	}
	linux := resp.GetLinux()
	if linux == nil {
		return configured, false, nil
	}
	switch d := linux.GetCgroupDriver(); d {
	case runtimeapi.CgroupDriver_SYSTEMD:
		return "systemd", false, nil
	case runtimeapi.CgroupDriver_CGROUPFS:
		return "cgroupfs", false, nil
	default:
		return configured, false, fmt.Errorf("runtime returned an unknown cgroup driver %d", d)
	}
}

// CgroupDriver asks the runtime for its cgroup driver (RuntimeConfig, up to
// 3 times 2 s apart while it fails otherwise than Unimplemented, as
// upstream) and returns CgroupDriverFromRuntime's answer, with upstream's
// log lines.
func CgroupDriver(ctx context.Context, rs internalapi.RuntimeService, clk clock.Clock, configured string) (string, bool, error) {
	logger := klog.FromContext(ctx)
	if clk == nil {
		clk = clock.RealClock{}
	}
	var (
		resp *runtimeapi.RuntimeConfigResponse
		err  error
	)
	for i := range 3 {
		if resp, err = rs.RuntimeConfig(ctx); err == nil || status.Code(err) == codes.Unimplemented {
			break
		}
		if i < 2 {
			select {
			case <-ctx.Done():
				return configured, false, ctx.Err()
			case <-clk.After(2 * time.Second):
			}
		}
	}
	driver, unsupported, err := CgroupDriverFromRuntime(configured, resp, err)
	switch {
	case err != nil:
	case unsupported:
		logger.Info("CRI implementation should be updated to support RuntimeConfig. Falling back to using cgroupDriver from kubelet config.",
			"cgroupDriver", driver, "losingSupportIn", CRILosingSupportVersion)
	case resp.GetLinux() != nil:
		logger.Info("Using cgroup driver setting received from the CRI runtime", "cgroupDriver", driver)
	}
	return driver, unsupported, err
}
