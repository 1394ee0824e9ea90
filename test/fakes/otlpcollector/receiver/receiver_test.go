package receiver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"google.golang.org/grpc"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// The receiver, proven by the OpenTelemetry SDK's own OTLP/gRPC exporter:
// the spans it exports arrive with their names, parents and resource.
func TestReceivesTheSDKsSpans(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	s := grpc.NewServer()
	Register(s, &out)
	go s.Serve(lis)
	defer s.Stop()

	ctx := context.Background()
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(lis.Addr().String()), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceNameKey.String("kubelet"), semconv.HostNameKey.String("n1")))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
	tr := tp.Tracer("scope")
	pctx, parent := tr.Start(ctx, "parent")
	_, child := tr.Start(pctx, "child")
	child.End()
	parent.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var spans []Span
	sc := bufio.NewScanner(bytes.NewReader(out.b.Bytes()))
	for sc.Scan() {
		var sp Span
		if err := json.Unmarshal(sc.Bytes(), &sp); err != nil {
			t.Fatal(err)
		}
		spans = append(spans, sp)
	}
	if len(spans) != 2 || spans[0].Name != "child" || spans[1].Name != "parent" {
		t.Fatalf("spans %+v", spans)
	}
	if spans[0].ParentSpanID != spans[1].SpanID || spans[0].TraceID != spans[1].TraceID || spans[0].Service != "kubelet" ||
		spans[0].Host != "n1" || spans[0].Scope != "scope" || spans[1].ParentSpanID != "" {
		t.Errorf("spans %+v", spans)
	}
}
