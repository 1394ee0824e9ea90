package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nodelet/nodelet/internal/apiclient"
	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/volumes"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	cliflag "k8s.io/component-base/cli/flag"
	internalapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/nodelog"
)

// Stats gives /stats/summary and the /metrics/resource collector.
type Stats interface {
	Summary(ctx context.Context) (*statsapi.Summary, error)
	ResourceCollector() prometheus.Collector
	// CadvisorCollector gives /metrics/cadvisor.
	CadvisorCollector() prometheus.Collector
}

// Config is the kubelet API server's configuration.
type Config struct {
	NodeName string
	// Kubelet is the whole resolved configuration (address, port, TLS,
	// authentication, authorization, debugging handlers, read-only port),
	// also served at /configz.
	Kubelet *kubeletv1beta1.KubeletConfiguration
	// Flags is the parsed command line, served at /flagz; nil: no /flagz.
	Flags *pflag.FlagSet
	// CertDir holds the self-signed serving certificate generated when no
	// tlsCertFile is configured (<root-dir>/pki by default).
	CertDir string
	// ServingCertificate, when set (serverTLSBootstrap), gives the serving
	// certificate of each handshake instead of the files; nil until the
	// first one is issued, when handshakes fail with "no serving
	// certificate available for the kubelet", as upstream's.
	ServingCertificate func() *tls.Certificate
	// Hostname and NodeIPs go into a self-signed certificate.
	Hostname string
	NodeIPs  []net.IP
	// LogDir is served at /logs/ when enableSystemLogHandler is on (with
	// enableSystemLogQuery, node log queries too: package nodelog).
	LogDir string
	// Client is nil in standalone mode.
	Client apiclient.Interface
	// Pods are the pods the node runs. Required.
	Pods Pods
	// Runtime is the CRI runtime (logs, exec, attach, port-forward).
	// Required.
	Runtime internalapi.RuntimeService
	// PodRuntime reads a pod's containers afresh and their restart
	// back-off. Required.
	PodRuntime PodRuntime
	// Relisted is the last relist's view of the runtime (/runningpods/);
	// ok is false before the first.
	Relisted func() ([]*kubecontainer.RunningPod, bool)
	Stats    Stats
	// Events gives a pod's recent events for the local API (nil: none).
	Events func(types.UID) []v1.Event
	// Restored tells whether a pod runs from the offline checkpoint,
	// not yet confirmed by the API server (nil: none does).
	Restored func(types.UID) bool
	// VolumeStates gives a pod's volumes' states for the local API (nil:
	// none known).
	VolumeStates func(types.UID) map[string]volumes.State
	// Clock is the back-offs' now (the real clock when nil).
	Clock clock.PassiveClock
}

// Server is the kubelet API.
type Server struct {
	cfg     Config
	pods    Pods
	runtime internalapi.RuntimeService
	clock   clock.PassiveClock
	stats   Stats
	auth    *auth
	// resource is the /metrics/resource registry, cadvisor /metrics/cadvisor's.
	resource, cadvisor *prometheus.Registry
	// logQuery serves /logs/ with enableSystemLogQuery (nil without).
	logQuery *nodelog.Handler
}

// New checks the configuration and builds the server. It does not listen.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Kubelet == nil:
		return nil, errors.New("server: Config.Kubelet is required")
	case cfg.Pods == nil:
		return nil, errors.New("server: Config.Pods is required")
	case cfg.Runtime == nil:
		return nil, errors.New("server: Config.Runtime is required")
	case cfg.PodRuntime == nil:
		return nil, errors.New("server: Config.PodRuntime is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	kc := cfg.Kubelet
	a, warnings, err := newAuth(cfg.NodeName, cfg.Client, kc.Authentication, kc.Authorization)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		klog.Background().Info("Warning: kubelet API", "problem", w)
	}
	s := &Server{cfg: cfg, pods: cfg.Pods, runtime: cfg.Runtime, clock: cfg.Clock, stats: cfg.Stats, auth: a, resource: prometheus.NewRegistry(), cadvisor: prometheus.NewRegistry()}
	if cfg.Stats != nil {
		s.resource.MustRegister(cfg.Stats.ResourceCollector())
		s.cadvisor.MustRegister(cfg.Stats.CadvisorCollector())
	}
	if ptr.Deref(kc.EnableSystemLogQuery, false) {
		if s.logQuery, err = nodelog.New(nodelog.Config{LogDir: cfg.LogDir}); err != nil {
			return nil, fmt.Errorf("server: enableSystemLogQuery: %w", err)
		}
	}
	return s, nil
}

// muxer is what handlers are registered with (an http.ServeMux).
type muxer interface {
	Handle(pattern string, h http.Handler)
	HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request))
}

// Handler is the authenticated API's router (without the auth filter).
func (s *Server) Handler() http.Handler {
	mux := &pathsMux{ServeMux: http.NewServeMux()}
	s.installReadOnly(mux)
	mux.Handle("/metrics/probes", promhttp.HandlerFor(metrics.Probes, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /configz", s.handleConfigz)
	mux.HandleFunc("GET /runningpods/", s.handleRunningPods)
	if kc := s.cfg.Kubelet; kc.EnableDebuggingHandlers == nil || *kc.EnableDebuggingHandlers {
		mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", s.handleContainerLogs)
		for _, p := range []string{"/exec/{ns}/{pod}/{container}", "/exec/{ns}/{pod}/{uid}/{container}"} {
			mux.HandleFunc(p, s.handleExec)
		}
		for _, p := range []string{"/attach/{ns}/{pod}/{container}", "/attach/{ns}/{pod}/{uid}/{container}"} {
			mux.HandleFunc(p, s.handleAttach)
		}
		for _, p := range []string{"/portForward/{ns}/{pod}", "/portForward/{ns}/{pod}/{uid}"} {
			mux.HandleFunc(p, s.handlePortForward)
		}
		for _, p := range []string{"POST /run/{ns}/{pod}/{container}", "POST /run/{ns}/{pod}/{uid}/{container}"} {
			mux.HandleFunc(p, s.handleRun)
		}
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		switch {
		case kc.EnableSystemLogHandler != nil && !*kc.EnableSystemLogHandler:
			mux.Handle("/logs/", disabled("logs endpoint is disabled."))
		case s.logQuery != nil:
			mux.Handle("GET /logs/", http.StripPrefix("/logs/", s.logQuery))
		default:
			mux.Handle("GET /logs/", http.StripPrefix("/logs/", http.FileServer(http.Dir(s.cfg.LogDir))))
		}
		// As upstream: with the debugging handlers, and last, so that
		// /statusz lists every path.
		s.installZPages(mux)
	} else {
		// As upstream: 405 with its message rather than 404.
		for _, p := range []string{"/run/", "/exec/", "/attach/", "/portForward/", "/containerLogs/", "/debug/pprof/", "/logs/"} {
			mux.Handle(p, disabled("Debug endpoints are disabled."))
		}
	}
	return mux
}

// disabled answers an endpoint the configuration turned off, as upstream.
func disabled(msg string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, msg, http.StatusMethodNotAllowed) })
}

// installReadOnly adds what the read-only port serves too.
func (s *Server) installReadOnly(mux muxer) {
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /pods", s.handlePods)
	mux.HandleFunc("GET /pods/", s.handlePods)
	mux.HandleFunc("GET /stats/summary", s.handleSummary)
	mux.Handle("/metrics", promhttp.HandlerFor(metrics.Kubelet, promhttp.HandlerOpts{}))
	mux.Handle("/metrics/resource", promhttp.HandlerFor(s.resource, promhttp.HandlerOpts{}))
	mux.Handle("/metrics/cadvisor", promhttp.HandlerFor(s.cadvisor, promhttp.HandlerOpts{}))
}

// instrument counts requests as kubelet_http_requests_total.
func instrument(serverType string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		// The first segment only: the rest names pods and containers.
		for i := 1; i < len(path); i++ {
			if path[i] == '/' {
				path = path[:i]
				break
			}
		}
		long := strconv.FormatBool(isSubpath(path, "/exec") || isSubpath(path, "/attach") || isSubpath(path, "/portForward") ||
			(isSubpath(path, "/containerLogs") && formBool(r, "follow")))
		metrics.HTTPRequests.WithLabelValues(r.Method, path, serverType, long).Inc()
		g := metrics.HTTPInflight.WithLabelValues(r.Method, path, serverType, long)
		g.Inc()
		defer g.Dec()
		h.ServeHTTP(w, r)
	})
}

// Run serves the API (and the read-only port, when set) until ctx is done.
// A port that cannot be bound is retried: pods keep running meanwhile.
func (s *Server) Run(ctx context.Context) error {
	kc := s.cfg.Kubelet
	logger := klog.FromContext(ctx)
	s.auth.run(ctx)
	tlsCfg, err := s.tlsConfig()
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(kc.Address, strconv.Itoa(int(kc.Port)))
	secure := &http.Server{
		Addr:              addr,
		Handler:           instrument("https", s.auth.filter(s.Handler())),
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: 30 * time.Second,
		MaxHeaderBytes:    1 << 20,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          nil,
	}
	servers := []*http.Server{secure}
	if kc.ReadOnlyPort > 0 {
		mux := http.NewServeMux()
		s.installReadOnly(mux)
		servers = append(servers, &http.Server{
			Addr:              net.JoinHostPort(kc.Address, strconv.Itoa(int(kc.ReadOnlyPort))),
			Handler:           instrument("readonly", mux),
			ReadHeaderTimeout: 30 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return ctx },
		})
	}
	errs := make(chan error, len(servers))
	for _, srv := range servers {
		go func() { errs <- serve(ctx, srv) }()
	}
	logger.Info("Serving the kubelet API", "address", addr, "readOnlyPort", kc.ReadOnlyPort)
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(shutdown)
	}
	for range servers {
		<-errs
	}
	return nil
}

// serve listens (retrying while the port is busy) and serves until ctx is
// done.
func serve(ctx context.Context, srv *http.Server) error {
	logger := klog.FromContext(ctx)
	for {
		ln, err := net.Listen("tcp", srv.Addr)
		if err == nil {
			if srv.TLSConfig != nil {
				ln = tls.NewListener(ln, srv.TLSConfig)
			}
			err = srv.Serve(ln)
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
		}
		logger.Error(err, "Kubelet API listener failed; retrying", "address", srv.Addr)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(5 * time.Second):
		}
	}
}

// tlsConfig loads (or generates, as upstream, into CertDir) the serving
// certificate and applies the TLS version and cipher suites.
func (s *Server) tlsConfig() (*tls.Config, error) {
	kc := s.cfg.Kubelet
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Client certificates are verified by the x509 authenticator
		// against the (reloadable) client CA bundle.
		ClientAuth: tls.RequestClientCert,
		NextProtos: []string{"http/1.1"},
	}
	if get := s.cfg.ServingCertificate; get != nil {
		// serverTLSBootstrap: the certificate manager's current one,
		// swapped in as it is renewed.
		cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := get(); c != nil {
				return c, nil
			}
			return nil, errors.New("no serving certificate available for the kubelet")
		}
		return s.tlsOptions(cfg)
	}
	certFile, keyFile := kc.TLSCertFile, kc.TLSPrivateKeyFile
	if certFile == "" && keyFile == "" {
		certFile = filepath.Join(s.cfg.CertDir, "kubelet.crt")
		keyFile = filepath.Join(s.cfg.CertDir, "kubelet.key")
		if err := ensureSelfSigned(certFile, keyFile, s.cfg.Hostname, s.cfg.NodeIPs); err != nil {
			return nil, err
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	cfg.Certificates = []tls.Certificate{cert}
	return s.tlsOptions(cfg)
}

// tlsOptions applies the configuration's TLS version and cipher suites.
func (s *Server) tlsOptions(cfg *tls.Config) (*tls.Config, error) {
	kc := s.cfg.Kubelet
	if kc.TLSMinVersion != "" {
		v, err := cliflag.TLSVersion(kc.TLSMinVersion)
		if err != nil {
			return nil, fmt.Errorf("tlsMinVersion: %w", err)
		}
		cfg.MinVersion = v
	}
	if len(kc.TLSCipherSuites) > 0 {
		ids, err := cliflag.TLSCipherSuites(kc.TLSCipherSuites)
		if err != nil {
			return nil, fmt.Errorf("tlsCipherSuites: %w", err)
		}
		cfg.CipherSuites = ids
	}
	return cfg, nil
}

// ensureSelfSigned writes a self-signed certificate and key unless both
// already exist, as upstream does when no serving certificate is given.
func ensureSelfSigned(certFile, keyFile, host string, ips []net.IP) error {
	if _, err := os.Stat(certFile); err == nil {
		if _, err := os.Stat(keyFile); err == nil {
			return nil
		}
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, ips, nil)
	if err != nil {
		return fmt.Errorf("generating a self-signed certificate: %w", err)
	}
	if err := certutil.WriteCert(certFile, certPEM); err != nil {
		return err
	}
	if err := keyutil.WriteKey(keyFile, keyPEM); err != nil {
		return err
	}
	klog.Background().Info("Generated a self-signed serving certificate", "cert", certFile)
	return nil
}

func writeJSON(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

// handlePods serves the pods the node runs as a v1 PodList.
func (s *Server) handlePods(w http.ResponseWriter, _ *http.Request) {
	list := &v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	for _, p := range s.pods.Pods() {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, list)
}

// handleRunningPods serves what the runtime runs as a v1 PodList.
func (s *Server) handleRunningPods(w http.ResponseWriter, r *http.Request) {
	pods, err := s.runningPods()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	list := &v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, list)
}

// handleConfigz serves the resolved configuration as upstream:
// {"kubeletconfig": {...}}.
func (s *Server) handleConfigz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{"kubeletconfig": s.cfg.Kubelet})
}

// handleSummary serves /stats/summary (only_cpu_and_memory=true trims it
// as upstream).
func (s *Server) handleSummary(w http.ResponseWriter, r *http.Request) {
	if s.stats == nil {
		http.Error(w, "stats are not available", http.StatusServiceUnavailable)
		return
	}
	sum, err := s.stats.Summary(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if formBool(r, "only_cpu_and_memory") {
		sum = cpuAndMemoryOnly(sum)
	}
	writeJSON(w, sum)
}

func cpuAndMemoryOnly(in *statsapi.Summary) *statsapi.Summary {
	out := &statsapi.Summary{Node: statsapi.NodeStats{
		NodeName: in.Node.NodeName, CPU: in.Node.CPU, Memory: in.Node.Memory, StartTime: in.Node.StartTime,
	}}
	for _, p := range in.Pods {
		q := statsapi.PodStats{PodRef: p.PodRef, StartTime: p.StartTime, CPU: p.CPU, Memory: p.Memory}
		for _, c := range p.Containers {
			q.Containers = append(q.Containers, statsapi.ContainerStats{Name: c.Name, StartTime: c.StartTime, CPU: c.CPU, Memory: c.Memory})
		}
		out.Pods = append(out.Pods, q)
	}
	return out
}
