package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseCRICalls(t *testing.T) {
	text := `# HELP grpc_server_handled_total Total number of RPCs completed on the server, regardless of success or failure.
# TYPE grpc_server_handled_total counter
grpc_server_handled_total{grpc_code="OK",grpc_method="RunPodSandbox",grpc_service="runtime.v1.RuntimeService",grpc_type="unary"} 100
grpc_server_handled_total{grpc_code="NotFound",grpc_method="ContainerStatus",grpc_service="runtime.v1.RuntimeService",grpc_type="unary"} 2
grpc_server_handled_total{grpc_code="OK",grpc_method="ContainerStatus",grpc_service="runtime.v1.RuntimeService",grpc_type="unary"} 198
grpc_server_handled_total{grpc_code="OK",grpc_method="ImageStatus",grpc_service="runtime.v1.ImageService",grpc_type="unary"} 100
grpc_server_handled_total{grpc_code="OK",grpc_method="Subscribe",grpc_service="containerd.services.events.v1.Events",grpc_type="server_stream"} 1
grpc_server_handled_total{grpc_code="OK",grpc_method="Version",grpc_service="runtime.v1alpha2.RuntimeService",grpc_type="unary"} 3
# TYPE grpc_server_started_total counter
grpc_server_started_total{grpc_method="RunPodSandbox",grpc_service="runtime.v1.RuntimeService",grpc_type="unary"} 101
`
	got, err := parseCRICalls(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"RunPodSandbox": 100, "ContainerStatus": 200, "ImageStatus": 100, criAll: 400}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := parseCRICalls(strings.NewReader("# TYPE other counter\nother 1\n")); err == nil {
		t.Error("metrics without grpc_server_handled_total: want an error")
	}
}

func TestCRIDiffAndMethods(t *testing.T) {
	before := map[string]float64{"ListContainers": 10, "Version": 1, criAll: 11}
	after := map[string]float64{"ListContainers": 15, "Version": 1, "RunPodSandbox": 2, criAll: 18}
	got := criDiff(before, after)
	want := map[string]float64{"ListContainers": 5, "RunPodSandbox": 2, criAll: 7}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("criDiff = %v, want %v", got, want)
	}
	if criDiff(nil, after) != nil {
		t.Error("criDiff without a before: want nil")
	}
	if m := criMethods(got, map[string]float64{"ImageStatus": 1}); !reflect.DeepEqual(m, []string{"ImageStatus", "ListContainers", "RunPodSandbox", criAll}) {
		t.Errorf("criMethods = %v", m)
	}
}
