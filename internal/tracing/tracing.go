package tracing

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/apimachinery/pkg/util/validation/field"
	componenttracing "k8s.io/component-base/tracing"
	tracingapi "k8s.io/component-base/tracing/api/v1"
	"k8s.io/klog/v2"
)

// InstrumentationScope is the scope of nodelet's own spans: upstream
// kubelet's.
const InstrumentationScope = "k8s.io/kubernetes/pkg/kubelet"

// Provider is a tracer provider that can be shut down (its last spans
// flushed).
type Provider = componenttracing.TracerProvider

// NewProvider is the tracer provider of cfg (nil: one that records
// nothing) for the node called hostname.
func NewProvider(ctx context.Context, cfg *tracingapi.TracingConfiguration, hostname string) (Provider, error) {
	if cfg == nil {
		return componenttracing.NewNoopTracerProvider(), nil
	}
	tp, err := componenttracing.NewProvider(ctx, cfg, []otlptracegrpc.Option{}, []resource.Option{
		resource.WithAttributes(semconv.ServiceNameKey.String("kubelet"), semconv.HostNameKey.String(hostname)),
	})
	if err != nil {
		return nil, fmt.Errorf("could not configure tracer provider: %w", err)
	}
	return tp, nil
}

// Validate is upstream's validation of the tracing configuration.
func Validate(cfg *tracingapi.TracingConfiguration) error {
	return tracingapi.ValidateTracingConfiguration(cfg, nil, field.NewPath("tracing")).ToAggregate()
}

// Noop is a tracer that records nothing, for components given none.
func Noop() trace.Tracer { return noop.NewTracerProvider().Tracer(InstrumentationScope) }

// PodAttributes are the attributes of a pod's spans, as upstream's syncPod.
func PodAttributes(uid, namespace, name string) []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.K8SPodUIDKey.String(uid),
		attribute.String("k8s.pod", namespace+"/"+name),
		semconv.K8SPodNameKey.String(name),
		semconv.K8SNamespaceNameKey.String(namespace),
	}
}

// End ends span, recording err (if any) as upstream does.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Flush shuts tp down, exporting the spans it holds (at most 5 s), when
// nodelet stops.
func Flush(ctx context.Context, tp Provider) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Flushing the traces failed")
	}
}
