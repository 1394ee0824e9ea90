// Package receiver is the OTLP/gRPC TraceService of otlpcollector: each span
// received becomes a JSON line.
package receiver

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
)

// Span is one received span, as written.
type Span struct {
	Service      string            `json:"service"`
	Host         string            `json:"host"`
	Scope        string            `json:"scope"`
	Name         string            `json:"name"`
	TraceID      string            `json:"traceID"`
	SpanID       string            `json:"spanID"`
	ParentSpanID string            `json:"parentSpanID,omitempty"`
	Attributes   map[string]string `json:"attributes,omitempty"`
}

type service struct {
	coltracepb.UnimplementedTraceServiceServer
	mu  sync.Mutex
	enc *json.Encoder
}

// Register serves the TraceService on s, writing spans to w.
func Register(s *grpc.Server, w io.Writer) {
	coltracepb.RegisterTraceServiceServer(s, &service{enc: json.NewEncoder(w)})
}

func (s *service) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := attributes(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				out := Span{Service: res["service.name"], Host: res["host.name"], Scope: ss.GetScope().GetName(), Name: sp.GetName(),
					TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
					Attributes: attributes(sp.GetAttributes())}
				if len(sp.GetParentSpanId()) > 0 {
					out.ParentSpanID = hex.EncodeToString(sp.GetParentSpanId())
				}
				if err := s.enc.Encode(out); err != nil {
					return nil, err
				}
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// attributes are the string forms of OTLP attributes.
func attributes(kvs []*commonpb.KeyValue) map[string]string {
	if len(kvs) == 0 {
		return nil
	}
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			out[kv.GetKey()] = v.GetStringValue()
		default:
			b, _ := json.Marshal(v)
			out[kv.GetKey()] = string(b)
		}
	}
	return out
}
