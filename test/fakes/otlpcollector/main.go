// Command otlpcollector is an OpenTelemetry trace receiver for the tests:
// it serves the OTLP/gRPC TraceService (opentelemetry.proto.collector.trace.v1,
// the protocol the OpenTelemetry SDKs' otlptracegrpc exporter speaks) on
// --listen, plain text, and appends every span it receives as one JSON line
// ({"service", "host", "scope", "name", "traceID", "spanID", "parentSpanID",
// "attributes"}) to --out.
package main

import (
	"flag"
	"log"
	"net"
	"os"

	"google.golang.org/grpc"

	"github.com/nodelet/nodelet/test/fakes/otlpcollector/receiver"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:4317", "the address to serve OTLP/gRPC on")
	out := flag.String("out", "", "the file spans are appended to, one JSON line each (required)")
	flag.Parse()
	if *out == "" {
		log.Fatal("--out is required")
	}
	f, err := os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	s := grpc.NewServer()
	receiver.Register(s, f)
	log.Printf("serving OTLP/gRPC traces on %s", lis.Addr())
	log.Fatal(s.Serve(lis))
}
