package nodestatus

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	critest "k8s.io/cri-api/pkg/apis/testing"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/ctortest"
	"github.com/nodelet/nodelet/internal/machine"
)

func TestNew(t *testing.T) {
	full := Config{
		Client:   fake.NewClientset(),
		NodeName: "n1",
		Kubelet:  &kubeletv1beta1.KubeletConfiguration{},
		Runtime:  critest.NewFakeRuntimeService(),
		Images:   critest.NewFakeImageService(),
		Recorder: record.NewFakeRecorder(10),
	}
	without := func(f func(*Config)) Config {
		c := full
		f(&c)
		return c
	}
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no client", Config: without(func(c *Config) { c.Client = nil }), WantErr: "Config.Client is required"},
		{Name: "no node name", Config: without(func(c *Config) { c.NodeName = "" }), WantErr: "Config.NodeName is required"},
		{Name: "no kubelet configuration", Config: without(func(c *Config) { c.Kubelet = nil }), WantErr: "Config.Kubelet is required"},
		{Name: "no runtime", Config: without(func(c *Config) { c.Runtime = nil }), WantErr: "Config.Runtime is required"},
		{Name: "no image service", Config: without(func(c *Config) { c.Images = nil }), WantErr: "Config.Images is required"},
		{Name: "no recorder", Config: without(func(c *Config) { c.Recorder = nil }), WantErr: "Config.Recorder is required"},
		{Name: "a nil clock is the real one", Config: full},
	}, func(t *testing.T, m *Manager) {
		ctortest.RealClock(t, m.cfg.Clock)
	})
}

func TestReadyWhileShuttingDown(t *testing.T) {
	rt := critest.NewFakeRuntimeService()
	rt.FakeStatus = &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, {Type: runtimeapi.NetworkReady, Status: true}}}
	var shutdown error
	m, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Recorder: record.NewFakeRecorder(10),
		Kubelet: &kubeletv1beta1.KubeletConfiguration{}, Runtime: rt, Images: critest.NewFakeImageService(),
		ShuttingDown: func() error { return shutdown }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		shutdown        error
		status          v1.ConditionStatus
		reason, message string
	}{
		{nil, v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"},
		{errors.New("node is shutting down"), v1.ConditionFalse, "KubeletNotReady", "node is shutting down"},
	} {
		shutdown = tc.shutdown
		n := &v1.Node{}
		m.fillStatus(context.Background(), n)
		var ready *v1.NodeCondition
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == v1.NodeReady {
				ready = &n.Status.Conditions[i]
			}
		}
		if ready == nil || ready.Status != tc.status || ready.Reason != tc.reason || ready.Message != tc.message {
			t.Errorf("shutdown %v: Ready %+v, want %s %s %q", tc.shutdown, ready, tc.status, tc.reason, tc.message)
		}
	}
}

// Registered is closed by the registration, not before.
func TestRegisteredClosedOnRegistration(t *testing.T) {
	client := fake.NewClientset()
	m, err := New(Config{Client: client, NodeName: "n1", Recorder: record.NewFakeRecorder(10),
		Kubelet: &kubeletv1beta1.KubeletConfiguration{}, Runtime: critest.NewFakeRuntimeService(), Images: critest.NewFakeImageService()})
	if err != nil {
		t.Fatal(err)
	}
	registered := m.Registered()
	select {
	case <-registered:
		t.Fatal("registered before registering")
	default:
	}
	if err := m.register(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-registered:
	default:
		t.Fatal("not registered after the Node was created")
	}
	if m.Node() == nil || m.Node().Name != "n1" {
		t.Fatalf("Node %v after registration", m.Node())
	}
}

// The machine's swap is in the Node's nodeInfo, as upstream (NodeSwap);
// none without swap.
func TestNodeInfoSwap(t *testing.T) {
	for _, capacity := range []int64{0, 1 << 30} {
		m, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Recorder: record.NewFakeRecorder(10),
			Kubelet: &kubeletv1beta1.KubeletConfiguration{}, Runtime: critest.NewFakeRuntimeService(), Images: critest.NewFakeImageService(),
			Machine: machine.Facts{MemoryCapacity: 4 << 30, Swap: machine.Swap{Capacity: capacity}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.register(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := m.Node().Status.NodeInfo.Swap
		switch {
		case capacity == 0 && got != nil:
			t.Errorf("no swap, nodeInfo.swap %+v", got)
		case capacity != 0 && (got == nil || got.Capacity == nil || *got.Capacity != capacity):
			t.Errorf("swap %d, nodeInfo.swap %+v", capacity, got)
		}
	}
}

// cidrRuntime records the pod CIDRs given through UpdateRuntimeConfig.
type cidrRuntime struct {
	*critest.FakeRuntimeService
	cidrs []string
}

func (r *cidrRuntime) UpdateRuntimeConfig(ctx context.Context, c *runtimeapi.RuntimeConfig) error {
	r.cidrs = append(r.cidrs, c.GetNetworkConfig().GetPodCidr())
	return r.FakeRuntimeService.UpdateRuntimeConfig(ctx, c)
}

// The Node's spec.podCIDRs reach the runtime once each time they change,
// again after a failed call, never while the Node has none.
func TestPodCIDRToRuntime(t *testing.T) {
	rt := &cidrRuntime{FakeRuntimeService: critest.NewFakeRuntimeService()}
	m, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Kubelet: &kubeletv1beta1.KubeletConfiguration{},
		Runtime: rt, Images: critest.NewFakeImageService(), Recorder: record.NewFakeRecorder(10)})
	if err != nil {
		t.Fatal(err)
	}
	node := func(cidrs ...string) *v1.Node { return &v1.Node{Spec: v1.NodeSpec{PodCIDRs: cidrs}} }
	ctx := context.Background()
	m.syncPodCIDR(ctx, node())
	m.syncPodCIDR(ctx, node("10.244.1.0/24", "fd00:1::/64"))
	m.syncPodCIDR(ctx, node("10.244.1.0/24", "fd00:1::/64"))
	rt.InjectError("UpdateRuntimeConfig", errors.New("runtime busy"))
	m.syncPodCIDR(ctx, node("10.244.2.0/24"))
	m.syncPodCIDR(ctx, node("10.244.2.0/24"))
	want := []string{"10.244.1.0/24,fd00:1::/64", "10.244.2.0/24", "10.244.2.0/24"}
	if !slices.Equal(rt.cidrs, want) {
		t.Fatalf("pod CIDRs given %q, want %q", rt.cidrs, want)
	}
}

// The node's images as upstream's: largest first, cut at
// nodeStatusMaxImages (-1: no cap), at most 5 names each.
func TestNodeImages(t *testing.T) {
	img := func(size uint64, names ...string) *runtimeapi.Image {
		return &runtimeapi.Image{Size: size, RepoTags: names}
	}
	list := func() []*runtimeapi.Image {
		var out []*runtimeapi.Image
		for i := range 60 {
			out = append(out, img(uint64(i+1), "img"))
		}
		return append(out, img(1000, "a", "b", "c", "d", "e", "f", "g"))
	}
	for _, tc := range []struct {
		max  *int32
		want int
	}{{nil, 50}, {ptr.To[int32](-1), 61}, {ptr.To[int32](0), 0}, {ptr.To[int32](3), 3}} {
		got := nodeImages(list(), tc.max)
		if len(got) != tc.want {
			t.Errorf("max %v: %d images, want %d", tc.max, len(got), tc.want)
			continue
		}
		if tc.want > 0 && (got[0].SizeBytes != 1000 || len(got[0].Names) != 5 || got[1].SizeBytes != 60) {
			t.Errorf("max %v: first images %+v %+v", tc.max, got[0], got[1])
		}
	}
}

func TestSetAddresses(t *testing.T) {
	internal := func(ips ...string) []v1.NodeAddress {
		var out []v1.NodeAddress
		for _, ip := range ips {
			out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
		}
		return append(out, v1.NodeAddress{Type: v1.NodeHostName, Address: "n1"})
	}
	ccm := []v1.NodeAddress{{Type: v1.NodeExternalIP, Address: "203.0.113.7"}}
	for _, tt := range []struct {
		name       string
		existing   []v1.NodeAddress
		annotation string
		ips        []string
		specified  bool
		external   bool
		want       []v1.NodeAddress
		wantAnno   string
	}{
		{"no cloud provider: detected IPs", nil, "", []string{"10.0.0.5"}, false, false, internal("10.0.0.5"), ""},
		{"no cloud provider: stale annotation removed", nil, "10.0.0.5", []string{"10.0.0.5"}, true, false, internal("10.0.0.5"), ""},
		{"no cloud provider: own addresses replaced", ccm, "", []string{"10.0.0.5"}, true, false, internal("10.0.0.5"), ""},
		{"external, no --node-ip: hostname only", nil, "", []string{"10.0.0.5"}, false, true, []v1.NodeAddress{{Type: v1.NodeHostName, Address: "n1"}}, ""},
		{"external, --node-ip: annotated and used", nil, "", []string{"10.0.0.5"}, true, true, internal("10.0.0.5"), "10.0.0.5"},
		{"external, dual stack", nil, "", []string{"10.0.0.5", "fd00::5"}, true, true, internal("10.0.0.5", "fd00::5"), "10.0.0.5,fd00::5"},
		{"external: the CCM's addresses kept", ccm, "", []string{"10.0.0.5"}, true, true, ccm, "10.0.0.5"},
	} {
		n := &v1.Node{Status: v1.NodeStatus{Addresses: tt.existing}}
		if tt.annotation != "" {
			n.Annotations = map[string]string{AnnotationProvidedIPAddr: tt.annotation}
		}
		setAddresses(n, tt.ips, tt.specified, "n1", tt.external)
		if !reflect.DeepEqual(n.Status.Addresses, tt.want) {
			t.Errorf("%s: addresses %v, want %v", tt.name, n.Status.Addresses, tt.want)
		}
		if got := n.Annotations[AnnotationProvidedIPAddr]; got != tt.wantAnno {
			t.Errorf("%s: annotation %q, want %q", tt.name, got, tt.wantAnno)
		}
	}
}

// With --cloud-provider=external the node registers with upstream's
// uninitialized taint, after registerWithTaints.
func TestExternalCloudProviderTaint(t *testing.T) {
	own := v1.Taint{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}
	for _, external := range []bool{false, true} {
		m, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Recorder: record.NewFakeRecorder(10),
			Kubelet: &kubeletv1beta1.KubeletConfiguration{RegisterWithTaints: []v1.Taint{own}}, Runtime: critest.NewFakeRuntimeService(),
			Images: critest.NewFakeImageService(), ExternalCloudProvider: external})
		if err != nil {
			t.Fatal(err)
		}
		want := []v1.Taint{own}
		if external {
			want = append(want, v1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule})
		}
		if got := m.initialNode().Spec.Taints; !reflect.DeepEqual(got, want) {
			t.Errorf("external %v: taints %v, want %v", external, got, want)
		}
	}
}
