package podresources

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	podresourcesv1alpha1 "k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
	"k8s.io/utils/cpuset"

	"github.com/nodelet/nodelet/internal/podspec"
)

// Dir and Socket name the socket under the root dir, as upstream:
// <root-dir>/pod-resources/kubelet.sock.
const (
	Dir    = "pod-resources"
	Socket = "kubelet.sock"
)

// Upstream's rate limit of the service (pkg/kubelet/apis/podresources).
const (
	DefaultQPS         = 100
	DefaultBurstTokens = 10
)

// Pods gives the pods the service reports.
type Pods interface {
	// ActivePods are the admitted pods not finished (List reports them, as
	// upstream with KubeletPodResourcesListUseActivePods).
	ActivePods() []*v1.Pod
	// PodByName finds an admitted pod (Get).
	PodByName(namespace, name string) (*v1.Pod, bool)
}

// Devices gives the devices assigned to containers and those the node can
// assign (device plugins). Nil: none.
type Devices interface {
	ContainerDevices(podUID, container string) []*podresourcesv1.ContainerDevices
	AllocatableDevices() []*podresourcesv1.ContainerDevices
}

// CPUs gives the exclusive CPUs of containers and those the node can
// assign (the CPU manager's static policy). Nil: none.
type CPUs interface {
	Exclusive(podUID, container string) cpuset.CPUSet
	Allocatable() cpuset.CPUSet
}

// Memory gives the pinned memory of containers and what the node can pin
// (the memory manager's Static policy). Nil: none.
type Memory interface {
	ContainerMemory(podUID, container string) []*podresourcesv1.ContainerMemory
	AllocatableMemory() []*podresourcesv1.ContainerMemory
}

// DynamicResources gives the ResourceClaims' devices of containers (the
// DRA manager). Nil: none.
type DynamicResources interface {
	ContainerDynamicResources(pod *v1.Pod, c *v1.Container) []*podresourcesv1.DynamicResource
}

// Config configures a Server.
type Config struct {
	// Path is the socket's path (<root-dir>/pod-resources/kubelet.sock).
	Path string
	Pods Pods
	// Devices is optional.
	Devices Devices
	// CPUs is optional.
	CPUs CPUs
	// Memory is optional.
	Memory Memory
	// DynamicResources is optional.
	DynamicResources DynamicResources
	// Registerer takes the kubelet_pod_resources_endpoint_* metrics (none
	// when nil).
	Registerer prometheus.Registerer
	// QPS and Burst limit the requests (upstream's 100 and 10 when 0).
	QPS   float64
	Burst int
}

// Server is the pod-resources gRPC server.
type Server struct {
	cfg     Config
	metrics *metrics
	limiter *rate.Limiter
}

// New returns a Server for cfg. It fails without Path or Pods.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Path == "":
		return nil, errors.New("podresources: Config.Path is required")
	case cfg.Pods == nil:
		return nil, errors.New("podresources: Config.Pods is required")
	}
	if cfg.QPS == 0 {
		cfg.QPS = DefaultQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultBurstTokens
	}
	m := newMetrics()
	if cfg.Registerer != nil {
		if err := m.register(cfg.Registerer); err != nil {
			return nil, err
		}
	}
	return &Server{cfg: cfg, metrics: m, limiter: rate.NewLimiter(rate.Limit(cfg.QPS), cfg.Burst)}, nil
}

// errLimitExceeded is upstream's answer to a request over the rate limit.
var errLimitExceeded = status.Error(codes.ResourceExhausted, "rejected by rate limit")

// Run serves the socket until ctx is done. A stale socket file (a previous
// run's) is replaced.
func (s *Server) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if err := os.MkdirAll(filepath.Dir(s.cfg.Path), 0o750); err != nil {
		return err
	}
	if err := os.Remove(s.cfg.Path); err != nil && !os.IsNotExist(err) {
		return err
	}
	l, err := net.Listen("unix", s.cfg.Path)
	if err != nil {
		return fmt.Errorf("podresources: %w", err)
	}
	if err := os.Chmod(s.cfg.Path, 0o660); err != nil {
		l.Close()
		return err
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !s.limiter.Allow() {
			return nil, errLimitExceeded
		}
		return h(ctx, req)
	}))
	podresourcesv1.RegisterPodResourcesListerServer(srv, &v1Server{s: s})
	podresourcesv1alpha1.RegisterPodResourcesListerServer(srv, &v1alpha1Server{s: s})
	go func() {
		<-ctx.Done()
		srv.Stop()
	}()
	logger.Info("Serving the pod-resources API", "socket", s.cfg.Path)
	if err := srv.Serve(l); err != nil && ctx.Err() == nil {
		return fmt.Errorf("podresources: %w", err)
	}
	return nil
}

// podResources is one pod's resources as v1 reports them: its containers
// and restartable init containers (sidecars), as upstream.
func (s *Server) podResources(pod *v1.Pod) *podresourcesv1.PodResources {
	out := &podresourcesv1.PodResources{Name: pod.Name, Namespace: pod.Namespace,
		Containers: make([]*podresourcesv1.ContainerResources, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))}
	add := func(c *v1.Container) {
		cr := &podresourcesv1.ContainerResources{Name: c.Name}
		if s.cfg.Devices != nil {
			cr.Devices = s.cfg.Devices.ContainerDevices(string(pod.UID), c.Name)
		}
		if s.cfg.CPUs != nil {
			cr.CpuIds = cpuIDs(s.cfg.CPUs.Exclusive(string(pod.UID), c.Name))
		}
		if s.cfg.Memory != nil {
			cr.Memory = s.cfg.Memory.ContainerMemory(string(pod.UID), c.Name)
		}
		if s.cfg.DynamicResources != nil {
			cr.DynamicResources = s.cfg.DynamicResources.ContainerDynamicResources(pod, c)
		}
		out.Containers = append(out.Containers, cr)
	}
	for i := range pod.Spec.InitContainers {
		if podspec.IsSidecar(&pod.Spec.InitContainers[i]) {
			add(&pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return out
}

type v1Server struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	s *Server
}

func (v *v1Server) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	v.s.metrics.requests.WithLabelValues("v1").Inc()
	v.s.metrics.list.WithLabelValues("v1").Inc()
	pods := v.s.cfg.Pods.ActivePods()
	out := &podresourcesv1.ListPodResourcesResponse{PodResources: make([]*podresourcesv1.PodResources, 0, len(pods))}
	for _, p := range pods {
		out.PodResources = append(out.PodResources, v.s.podResources(p))
	}
	return out, nil
}

func (v *v1Server) Get(_ context.Context, req *podresourcesv1.GetPodResourcesRequest) (*podresourcesv1.GetPodResourcesResponse, error) {
	v.s.metrics.requests.WithLabelValues("v1").Inc()
	v.s.metrics.get.WithLabelValues("v1").Inc()
	pod, ok := v.s.cfg.Pods.PodByName(req.PodNamespace, req.PodName)
	if !ok {
		v.s.metrics.getErrors.WithLabelValues("v1").Inc()
		// Upstream's words (a plain error: gRPC code Unknown).
		return nil, fmt.Errorf("pod %s in namespace %s not found", req.PodName, req.PodNamespace)
	}
	return &podresourcesv1.GetPodResourcesResponse{PodResources: v.s.podResources(pod)}, nil
}

// GetAllocatableResources: the devices, CPUs and memory the node can
// assign (CPUs under the static CPU manager policy, memory under the
// Static memory manager policy, as upstream).
func (v *v1Server) GetAllocatableResources(context.Context, *podresourcesv1.AllocatableResourcesRequest) (*podresourcesv1.AllocatableResourcesResponse, error) {
	v.s.metrics.requests.WithLabelValues("v1").Inc()
	v.s.metrics.getAllocatable.WithLabelValues("v1").Inc()
	out := &podresourcesv1.AllocatableResourcesResponse{}
	if v.s.cfg.Devices != nil {
		out.Devices = v.s.cfg.Devices.AllocatableDevices()
	}
	if v.s.cfg.CPUs != nil {
		out.CpuIds = cpuIDs(v.s.cfg.CPUs.Allocatable())
	}
	if v.s.cfg.Memory != nil {
		out.Memory = v.s.cfg.Memory.AllocatableMemory()
	}
	return out, nil
}

type v1alpha1Server struct {
	podresourcesv1alpha1.UnimplementedPodResourcesListerServer
	s *Server
}

func (v *v1alpha1Server) List(ctx context.Context, _ *podresourcesv1alpha1.ListPodResourcesRequest) (*podresourcesv1alpha1.ListPodResourcesResponse, error) {
	v.s.metrics.requests.WithLabelValues("v1alpha1").Inc()
	v.s.metrics.list.WithLabelValues("v1alpha1").Inc()
	pods := v.s.cfg.Pods.ActivePods()
	out := &podresourcesv1alpha1.ListPodResourcesResponse{PodResources: make([]*podresourcesv1alpha1.PodResources, 0, len(pods))}
	for _, p := range pods {
		pr := &podresourcesv1alpha1.PodResources{Name: p.Name, Namespace: p.Namespace}
		// v1alpha1 lists the app containers only, as upstream's.
		for _, c := range p.Spec.Containers {
			cr := &podresourcesv1alpha1.ContainerResources{Name: c.Name}
			if v.s.cfg.Devices != nil {
				for _, d := range v.s.cfg.Devices.ContainerDevices(string(p.UID), c.Name) {
					cr.Devices = append(cr.Devices, &podresourcesv1alpha1.ContainerDevices{ResourceName: d.ResourceName, DeviceIds: d.DeviceIds})
				}
			}
			pr.Containers = append(pr.Containers, cr)
		}
		out.PodResources = append(out.PodResources, pr)
	}
	return out, nil
}

// cpuIDs is a cpuset as the API's list of CPU IDs (nil when empty).
func cpuIDs(set cpuset.CPUSet) []int64 {
	var out []int64
	for _, id := range set.List() {
		out = append(out, int64(id))
	}
	return out
}
