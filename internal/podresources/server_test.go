package podresources

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	podresourcesv1alpha1 "k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/ctortest"
)

type fakePods []*v1.Pod

func (f fakePods) ActivePods() []*v1.Pod { return f }
func (f fakePods) PodByName(ns, name string) (*v1.Pod, bool) {
	for _, p := range f {
		if p.Namespace == ns && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

type fakeDevices map[string][]*podresourcesv1.ContainerDevices

func (f fakeDevices) ContainerDevices(uid, c string) []*podresourcesv1.ContainerDevices {
	return f[uid+"/"+c]
}
func (f fakeDevices) AllocatableDevices() []*podresourcesv1.ContainerDevices { return f["allocatable"] }

func pod(ns, name string, uid types.UID, init []v1.Container, ctrs ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid}, Spec: v1.PodSpec{InitContainers: init}}
	for _, c := range ctrs {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c})
	}
	return p
}

// serve starts a Server on a socket in a temp dir and returns a client
// connection to it.
func serve(t *testing.T, cfg Config) *grpc.ClientConn {
	t.Helper()
	cfg.Path = filepath.Join(t.TempDir(), Dir, Socket)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	// Run listens in its goroutine: calls wait for the socket rather than
	// failing fast on a dial that came first.
	conn, err := grpc.NewClient("unix://"+cfg.Path, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestListGetAllocatable(t *testing.T) {
	sidecar := v1.Container{Name: "proxy", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}
	pods := fakePods{
		pod("ns", "web", "u1", []v1.Container{{Name: "setup"}, sidecar}, "app", "log"),
		pod("ns", "db", "u2", nil, "db"),
	}
	gpu := &podresourcesv1.ContainerDevices{ResourceName: "example.com/gpu", DeviceIds: []string{"gpu0"}}
	devs := fakeDevices{"u1/app": {gpu}, "allocatable": {gpu, {ResourceName: "example.com/gpu", DeviceIds: []string{"gpu1"}}}}
	reg := prometheus.NewRegistry()
	cpus := fakeCPUs{"u2/db": cpuset.New(2, 3), "allocatable": cpuset.New(1, 2, 3)}
	mem := &podresourcesv1.ContainerMemory{MemoryType: "memory", Size: 1 << 30, Topology: &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: 0}}}}
	mems := fakeMemory{"u2/db": {mem}, "allocatable": {mem, mem}}
	conn := serve(t, Config{Pods: pods, Devices: devs, CPUs: cpus, Memory: mems, Registerer: reg})
	cl := podresourcesv1.NewPodResourcesListerClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	list, err := cl.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range list.PodResources {
		for _, c := range p.Containers {
			s := p.Namespace + "/" + p.Name + "/" + c.Name
			for _, d := range c.Devices {
				s += "=" + d.ResourceName + ":" + strings.Join(d.DeviceIds, ",")
			}
			if len(c.CpuIds) > 0 {
				s += fmt.Sprintf("=cpus:%v", c.CpuIds)
			}
			for _, m := range c.Memory {
				s += fmt.Sprintf("=%s:%d@%d", m.MemoryType, m.Size, m.Topology.Nodes[0].ID)
			}
			got = append(got, s)
		}
	}
	// The sidecar is listed (before the app containers); the plain init container is not.
	want := "ns/web/proxy ns/web/app=example.com/gpu:gpu0 ns/web/log ns/db/db=cpus:[2 3]=memory:1073741824@0"
	if strings.Join(got, " ") != want {
		t.Errorf("List: %v, want %s", got, want)
	}

	g, err := cl.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: "ns", PodName: "db"})
	if err != nil || g.PodResources.Name != "db" || len(g.PodResources.Containers) != 1 || g.PodResources.Containers[0].Name != "db" {
		t.Errorf("Get db: %v %v", g, err)
	}
	_, err = cl.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: "ns", PodName: "nope"})
	if err == nil || !strings.Contains(err.Error(), "pod nope in namespace ns not found") {
		t.Errorf("Get of a missing pod: %v", err)
	}

	a, err := cl.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil || len(a.Devices) != 2 || fmt.Sprint(a.CpuIds) != "[1 2 3]" || len(a.Memory) != 2 {
		t.Errorf("GetAllocatableResources: %v %v", a, err)
	}

	alpha, err := podresourcesv1alpha1.NewPodResourcesListerClient(conn).List(ctx, &podresourcesv1alpha1.ListPodResourcesRequest{})
	if err != nil || len(alpha.PodResources) != 2 || len(alpha.PodResources[0].Containers) != 2 || alpha.PodResources[0].Containers[0].Devices[0].DeviceIds[0] != "gpu0" {
		t.Errorf("v1alpha1 List: %v %v", alpha, err)
	}

	for name, want := range map[string]float64{
		"kubelet_pod_resources_endpoint_requests_total":           5,
		"kubelet_pod_resources_endpoint_requests_list":            2,
		"kubelet_pod_resources_endpoint_requests_get":             2,
		"kubelet_pod_resources_endpoint_requests_get_allocatable": 1,
		"kubelet_pod_resources_endpoint_errors_get":               1,
	} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.Metric {
					sum += m.GetCounter().GetValue()
				}
			}
		}
		if sum != want {
			t.Errorf("%s = %v, want %v", name, sum, want)
		}
	}
}

// Over the rate limit, requests are refused with ResourceExhausted, as upstream.
func TestRateLimit(t *testing.T) {
	conn := serve(t, Config{Pods: fakePods{}, QPS: 0.001, Burst: 2})
	cl := podresourcesv1.NewPodResourcesListerClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var codesSeen []codes.Code
	for range 3 {
		_, err := cl.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
		codesSeen = append(codesSeen, status.Code(err))
	}
	if codesSeen[0] != codes.OK || codesSeen[1] != codes.OK || codesSeen[2] != codes.ResourceExhausted {
		t.Errorf("codes %v, want OK OK ResourceExhausted", codesSeen)
	}
}

func TestNew(t *testing.T) {
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no path", Config: Config{Pods: fakePods{}}, WantErr: "Config.Path is required"},
		{Name: "no pods", Config: Config{Path: "/x"}, WantErr: "Config.Pods is required"},
		{Name: "defaults", Config: Config{Path: "/x", Pods: fakePods{}}},
	}, func(t *testing.T, s *Server) {
		if s.cfg.QPS != DefaultQPS || s.cfg.Burst != DefaultBurstTokens {
			t.Errorf("qps %v burst %d, want upstream's %v and %d", s.cfg.QPS, s.cfg.Burst, DefaultQPS, DefaultBurstTokens)
		}
		if s.limiter.Limit() != rate.Limit(DefaultQPS) || s.limiter.Burst() != DefaultBurstTokens {
			t.Errorf("limiter %v/%d, want %v/%d", s.limiter.Limit(), s.limiter.Burst(), DefaultQPS, DefaultBurstTokens)
		}
	})
}

type fakeCPUs map[string]cpuset.CPUSet

type fakeMemory map[string][]*podresourcesv1.ContainerMemory

func (f fakeMemory) ContainerMemory(uid, name string) []*podresourcesv1.ContainerMemory {
	return f[uid+"/"+name]
}
func (f fakeMemory) AllocatableMemory() []*podresourcesv1.ContainerMemory { return f["allocatable"] }

func (f fakeCPUs) Exclusive(uid, name string) cpuset.CPUSet { return f[uid+"/"+name] }
func (f fakeCPUs) Allocatable() cpuset.CPUSet               { return f["allocatable"] }
