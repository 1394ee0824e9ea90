package dra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpcstats "google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	"k8s.io/utils/clock"
)

// DefaultCallTimeout is how long a DRA driver's plugin has to answer a
// call (upstream's defaultClientCallTimeout).
const DefaultCallTimeout = 45 * time.Second

// DefaultWipingDelay is how long a driver may be without a connected
// plugin before its ResourceSlices of this node are deleted (upstream's
// defaultWipingDelay).
const DefaultWipingDelay = 30 * time.Second

// ServicesSupported are the DRAPlugin gRPC services nodelet calls, the
// newest first (upstream's servicesSupportedByKubelet).
var ServicesSupported = []string{drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService}

// PluginsConfig configures Plugins.
type PluginsConfig struct {
	// Client deletes the ResourceSlices of drivers gone (none when nil).
	Client Client
	// NodeName is this node's name. Required with Client.
	NodeName string
	// WipingDelay defaults to DefaultWipingDelay.
	WipingDelay time.Duration
	// CallTimeout defaults to DefaultCallTimeout.
	CallTimeout time.Duration
	// Registerer takes upstream's dra_grpc_operations_duration_seconds
	// (none when nil).
	Registerer prometheus.Registerer
	// Clock defaults to the real clock.
	Clock clock.WithDelayedExecution
}

// Plugins are the registered kubelet plugins of DRA drivers, by driver
// (upstream's DRAPluginManager): the plugin watcher's handler of the
// DRAPlugin type. A driver may have several plugins (a rolling update);
// calls go to the newest connected one. A driver with no connected plugin
// for WipingDelay has its ResourceSlices of this node deleted, as are all
// of the node's slices at start (no driver has registered yet). Safe for
// concurrent use.
type Plugins struct {
	cfg      PluginsConfig
	duration *prometheus.HistogramVec

	// connChanged, when set (tests), hears each plugin's connection state
	// once the registry acted on it.
	connChanged func(driver string, connected bool)

	mu     sync.Mutex
	byName map[string][]*Plugin
	wipes  map[string]clock.Timer
	ctx    context.Context
	cancel context.CancelFunc
}

// NewPlugins returns an empty registry.
func NewPlugins(cfg PluginsConfig) (*Plugins, error) {
	if cfg.Client != nil && cfg.NodeName == "" {
		return nil, errors.New("dra: PluginsConfig.NodeName is required with a client")
	}
	if cfg.WipingDelay <= 0 {
		cfg.WipingDelay = DefaultWipingDelay
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	p := &Plugins{cfg: cfg, byName: map[string][]*Plugin{}, wipes: map[string]clock.Timer{},
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "dra", Name: "grpc_operations_duration_seconds",
			Help: "[ALPHA] Duration in seconds of the DRA gRPC operations", Buckets: prometheus.ExponentialBucketsRange(.1, 40, 15)},
			[]string{"driver_name", "method_name", "grpc_status_code"})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(p.duration)
	}
	return p, nil
}

// Run deletes the node's ResourceSlices left from before (no driver is
// registered yet: pods must not be scheduled on devices nobody prepares),
// then waits for ctx, closing every plugin's connection at the end.
func (p *Plugins) Run(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		p.cancel()
	}()
	p.wipe(klog.NewContext(p.ctx, klog.FromContext(ctx)), "")
	<-ctx.Done()
	p.mu.Lock()
	var conns []*grpc.ClientConn
	for _, plugins := range p.byName {
		for _, pl := range plugins {
			conns = append(conns, pl.conn)
		}
	}
	for _, t := range p.wipes {
		t.Stop()
	}
	p.mu.Unlock()
	// Not under the lock: closing may call HandleConn.
	for _, c := range conns {
		_ = c.Close()
	}
	return nil
}

// chooseService is the newest DRAPlugin service both sides support
// (upstream's validateSupportedServices).
func chooseService(services []string) (string, error) {
	if len(services) == 0 {
		return "", errors.New("empty list of supported gRPC services (aka supported versions)")
	}
	for _, s := range services {
		if slices.Contains(ServicesSupported, s) {
			return s, nil
		}
	}
	return "", fmt.Errorf("none of services supported by the plugin (%q) are supported by the kubelet (%q)", services, ServicesSupported)
}

// ValidatePlugin accepts a plugin offering a DRAPlugin service nodelet
// calls.
func (p *Plugins) ValidatePlugin(name, endpoint string, versions []string) error {
	if _, err := chooseService(versions); err != nil {
		return fmt.Errorf("invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %w", name, endpoint, err)
	}
	return nil
}

// RegisterPlugin adds a driver's plugin at endpoint (its DRA socket): a
// gRPC connection, made now so that its state is known before any call.
func (p *Plugins) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string) error {
	service, err := chooseService(versions)
	if err != nil {
		return fmt.Errorf("invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %w", name, endpoint, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, old := range p.byName[name] {
		if old.endpoint == endpoint {
			return fmt.Errorf("endpoint %s already registered for DRA driver plugin %s", endpoint, name)
		}
	}
	pl := &Plugin{driver: name, endpoint: endpoint, service: service, timeout: p.cfg.CallTimeout, owner: p}
	conn, err := grpc.NewClient("unix:"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(p.observe(name)), grpc.WithStatsHandler(pl))
	if err != nil {
		return fmt.Errorf("create gRPC connection to DRA driver %s plugin at endpoint %s: %w", name, endpoint, err)
	}
	pl.conn = conn
	conn.Connect()
	p.byName[name] = append(p.byName[name], pl)
	klog.FromContext(ctx).Info("Registered DRA plugin", "driverName", name, "endpoint", endpoint, "chosenService", service, "numPlugins", len(p.byName[name]))
	p.syncLocked(name)
	return nil
}

// DeRegisterPlugin removes a driver's plugin whose socket went.
func (p *Plugins) DeRegisterPlugin(name, endpoint string) {
	p.mu.Lock()
	plugins := p.byName[name]
	i := slices.IndexFunc(plugins, func(pl *Plugin) bool { return pl.endpoint == endpoint })
	if i < 0 {
		p.mu.Unlock()
		return
	}
	gone := plugins[i]
	if len(plugins) == 1 {
		delete(p.byName, name)
	} else {
		p.byName[name] = slices.Delete(plugins, i, i+1)
	}
	klog.FromContext(p.ctx).Info("Unregistered DRA plugin", "driverName", name, "endpoint", endpoint, "numPlugins", len(p.byName[name]))
	p.syncLocked(name)
	p.mu.Unlock()
	// Not under the lock: closing may call HandleConn.
	_ = gone.conn.Close()
}

// Get is the plugin to call for driver: the newest connected one, else
// the newest.
func (p *Plugins) Get(driver string) (*Plugin, error) {
	if driver == "" {
		return nil, errors.New("DRA driver name is empty")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	plugins := p.byName[driver]
	if len(plugins) == 0 {
		return nil, fmt.Errorf("DRA driver %s is not registered", driver)
	}
	for i := len(plugins) - 1; i >= 0; i-- {
		if plugins[i].connected {
			return plugins[i], nil
		}
	}
	return plugins[len(plugins)-1], nil
}

// Drivers are the registered drivers' names.
func (p *Plugins) Drivers() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.byName))
	for name := range p.byName {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// syncLocked schedules the wiping of a driver's ResourceSlices when none
// of its plugins is connected, and cancels it when one is (upstream's
// sync); mu held.
func (p *Plugins) syncLocked(driver string) {
	if p.cfg.Client == nil {
		return
	}
	usable := slices.ContainsFunc(p.byName[driver], func(pl *Plugin) bool { return pl.connected })
	t, pending := p.wipes[driver]
	switch {
	case usable && pending:
		t.Stop()
		delete(p.wipes, driver)
	case !usable && !pending:
		p.wipes[driver] = p.cfg.Clock.AfterFunc(p.cfg.WipingDelay, func() {
			p.mu.Lock()
			delete(p.wipes, driver)
			p.mu.Unlock()
			p.wipe(p.ctx, driver)
		})
	}
}

// wipe deletes the node's ResourceSlices (of driver, or all when ""),
// retrying with back-off until it succeeds or the registry stops.
func (p *Plugins) wipe(ctx context.Context, driver string) {
	if p.cfg.Client == nil {
		return
	}
	logger := klog.FromContext(ctx)
	selector := fields.Set{resourceapi.ResourceSliceSelectorNodeName: p.cfg.NodeName}
	if driver != "" {
		selector[resourceapi.ResourceSliceSelectorDriver] = driver
	}
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Cap: 5 * time.Minute, Steps: 100}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		err := p.cfg.Client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{FieldSelector: selector.String()})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			logger.V(2).Info("Deleted ResourceSlices", "fieldSelector", selector.String())
			return true, nil
		default:
			logger.V(3).Info("Deleting ResourceSlices failed, retrying", "fieldSelector", selector.String(), "err", err)
			return false, nil
		}
	})
}

// observe times each call into dra_grpc_operations_duration_seconds.
func (p *Plugins) observe(driver string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := p.cfg.Clock.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		p.duration.WithLabelValues(driver, method, status.Code(err).String()).Observe(p.cfg.Clock.Since(start).Seconds())
		return err
	}
}

// Plugin is one registered plugin of a DRA driver.
type Plugin struct {
	driver, endpoint, service string
	timeout                   time.Duration
	conn                      *grpc.ClientConn
	owner                     *Plugins
	// connected is guarded by owner.mu.
	connected bool
}

// Driver is the plugin's driver name.
func (pl *Plugin) Driver() string { return pl.driver }

// client is the DRAPlugin client of the service chosen at registration,
// v1beta1 converted to v1.
func (pl *Plugin) client() drapbv1.DRAPluginClient {
	if pl.service == drapbv1beta1.DRAPluginService {
		return drapbv1beta1.V1Beta1ClientWrapper{DRAPluginClient: drapbv1beta1.NewDRAPluginClient(pl.conn)}
	}
	return drapbv1.NewDRAPluginClient(pl.conn)
}

// NodePrepareResources asks the plugin to prepare claims (its call
// timeout applies).
func (pl *Plugin) NodePrepareResources(ctx context.Context, req *drapbv1.NodePrepareResourcesRequest) (*drapbv1.NodePrepareResourcesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, pl.timeout)
	defer cancel()
	return pl.client().NodePrepareResources(ctx, req)
}

// NodeUnprepareResources asks the plugin to unprepare claims.
func (pl *Plugin) NodeUnprepareResources(ctx context.Context, req *drapbv1.NodeUnprepareResourcesRequest) (*drapbv1.NodeUnprepareResourcesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, pl.timeout)
	defer cancel()
	return pl.client().NodeUnprepareResources(ctx, req)
}

// The grpc stats.Handler: HandleConn tracks whether the plugin is
// connected, and its driver's ResourceSlices follow.
func (pl *Plugin) TagRPC(ctx context.Context, _ *grpcstats.RPCTagInfo) context.Context   { return ctx }
func (pl *Plugin) HandleRPC(context.Context, grpcstats.RPCStats)                         {}
func (pl *Plugin) TagConn(ctx context.Context, _ *grpcstats.ConnTagInfo) context.Context { return ctx }
func (pl *Plugin) HandleConn(_ context.Context, s grpcstats.ConnStats) {
	p := pl.owner
	p.mu.Lock()
	defer p.mu.Unlock()
	switch s.(type) {
	case *grpcstats.ConnBegin:
		pl.connected = true
	case *grpcstats.ConnEnd:
		pl.connected = false
	default:
		return
	}
	p.syncLocked(pl.driver)
	if p.connChanged != nil {
		p.connChanged(pl.driver, pl.connected)
	}
}
