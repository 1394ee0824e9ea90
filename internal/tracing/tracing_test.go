package tracing

import (
	"context"
	"strings"
	"testing"

	tracingapi "k8s.io/component-base/tracing/api/v1"
	"k8s.io/utils/ptr"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     *tracingapi.TracingConfiguration
		wantErr string
	}{
		{name: "unset"},
		{name: "endpoint and rate", cfg: &tracingapi.TracingConfiguration{Endpoint: ptr.To("127.0.0.1:4317"), SamplingRatePerMillion: ptr.To[int32](1000)}},
		{name: "rate above a million", cfg: &tracingapi.TracingConfiguration{SamplingRatePerMillion: ptr.To[int32](2000000)},
			wantErr: "tracing.samplingRatePerMillion"},
		{name: "negative rate", cfg: &tracingapi.TracingConfiguration{SamplingRatePerMillion: ptr.To[int32](-1)},
			wantErr: "tracing.samplingRatePerMillion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.cfg)
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestNewProvider(t *testing.T) {
	ctx := context.Background()
	tp, err := NewProvider(ctx, nil, "n")
	if err != nil {
		t.Fatal(err)
	}
	if _, span := tp.Tracer(InstrumentationScope).Start(ctx, "x"); span.SpanContext().IsValid() {
		t.Error("without tracing, spans are recorded")
	}
	// Configured: the exporter connects lazily, spans are sampled.
	tp, err = NewProvider(ctx, &tracingapi.TracingConfiguration{Endpoint: ptr.To("127.0.0.1:1"), SamplingRatePerMillion: ptr.To[int32](1000000)}, "n")
	if err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer(InstrumentationScope).Start(ctx, "x")
	if !span.SpanContext().IsSampled() {
		t.Error("a rate of a million does not sample")
	}
	span.End()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_ = tp.Shutdown(cctx)
}
