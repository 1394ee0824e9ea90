package config

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/internal/cpumanager"
	"github.com/nodelet/nodelet/internal/eviction"
	"github.com/nodelet/nodelet/internal/memorymanager"
	"github.com/nodelet/nodelet/internal/rootdir"
	"github.com/nodelet/nodelet/internal/topologymanager"
)

// Options is everything nodelet is started with: the flags that are not part
// of the KubeletConfiguration, and the resolved configuration itself.
type Options struct {
	// ConfigFile is the path given with --config, if any.
	ConfigFile string
	// RuntimeCgroups is --runtime-cgroups: the runtime's cgroup, for its
	// stats (the summary's "runtime" system container).
	RuntimeCgroups string
	// Flags are the parsed command line (nodelet's flags with their
	// values), served at /flagz.
	Flags *pflag.FlagSet
	// CloudProvider is --cloud-provider: "" (none) or "external" (a cloud
	// controller manager initializes the node: it registers with upstream's
	// uninitialized taint and leaves the addresses to it). Built-in
	// providers are refused, as upstream.
	CloudProvider string
	// ImageCredentialProviderConfig is --image-credential-provider-config:
	// the CredentialProviderConfig file (or directory of them) naming the
	// exec plugins that give image pull credentials; with
	// ImageCredentialProviderBinDir, where those plugins are.
	ImageCredentialProviderConfig string
	ImageCredentialProviderBinDir string
	// ConfigDir is --config-dir: KubeletConfiguration drop-ins applied
	// over ConfigFile's, in lexical order (flags still win).
	ConfigDir string
	// KubeconfigPath is --kubeconfig; empty means standalone mode.
	KubeconfigPath string
	// BootstrapKubeconfig is --bootstrap-kubeconfig: the credentials a
	// client certificate is requested with when the kubeconfig is missing
	// or its certificate unusable (TLS bootstrap).
	BootstrapKubeconfig string
	// HostnameOverride is --hostname-override.
	HostnameOverride string
	// NodeName is the name this node goes by: the hostname override or the
	// machine's hostname, lower-cased.
	NodeName string
	// RootDir is --root-dir, where pod directories live.
	RootDir string
	// NodeIP is --node-ip.
	NodeIP string
	// NodeLabels is --node-labels.
	NodeLabels map[string]string
	// CertDir is --cert-dir: the client and serving certificates of TLS
	// bootstrap and rotation, or a self-signed serving certificate when
	// tlsCertFile is not set (<root-dir>/pki by default).
	CertDir string
	// EnableServer is --enable-server: serve the kubelet API.
	EnableServer bool
	// LocalAPI is --local-api (nodelet's): serve the kubelet API without
	// TLS on <root-dir>/nodelet.sock, root only, for the nodelet CLI.
	LocalAPI bool
	// ContainerGC is the dead containers' collection, upstream's flags
	// --minimum-container-ttl-duration (MinAge),
	// --maximum-dead-containers-per-container and --maximum-dead-containers.
	ContainerGC ContainerGCPolicy
	// ImageGCPeriod and ContainerGCPeriod are how often images (5 minutes)
	// and dead containers (1 minute) are collected, upstream's fixed
	// periods (nodelet's flags --image-gc-period, --container-gc-period,
	// for tests).
	ImageGCPeriod, ContainerGCPeriod time.Duration
	// Offline is nodelet's offline autonomy: --offline-autonomy and
	// --offline-secrets, or the config file's offlineAutonomy and
	// offlineSecrets (nodelet's own fields, which the upstream kubelet
	// ignores with a warning).
	Offline Offline

	Config kubeletv1beta1.KubeletConfiguration
}

// Offline is what nodelet keeps to run its API pods without the API
// server.
type Offline struct {
	// Autonomy keeps the local checkpoint of the API pods and runs them from
	// it when nodelet starts without the API server (default true; false
	// behaves like upstream).
	Autonomy bool `json:"offlineAutonomy"`
	// Secrets lets the checkpoint keep the Secrets the pods use (default
	// false: pod specs, ConfigMaps, tokens and service environment only).
	Secrets bool `json:"offlineSecrets"`
}

// offlineFields are the config file's fields of Offline.
type offlineFields struct {
	Autonomy *bool `json:"offlineAutonomy"`
	Secrets  *bool `json:"offlineSecrets"`
}

// ContainerGCPolicy is what dead containers the node keeps.
type ContainerGCPolicy struct {
	MinAge                            time.Duration
	MaxPerPodContainer, MaxContainers int
}

const (
	DefaultRootDir                  = "/var/lib/kubelet"
	DefaultContainerRuntimeEndpoint = "unix:///run/containerd/containerd.sock"
	DefaultPodLogsDir               = "/var/log/pods"
)

// ErrVersion is Parse's answer to --version: print the version and exit.
// ErrVersionRaw answers --version=raw (the whole version.Info, as upstream).
var (
	ErrVersion    = errors.New("version requested")
	ErrVersionRaw = errors.New("raw version requested")
)

// versionFlag is upstream's --version: a bool that also takes "raw".
type versionFlag string

func (f *versionFlag) String() string { return string(*f) }
func (f *versionFlag) Type() string   { return "version[=true]" }

func (f *versionFlag) Set(s string) error {
	switch strings.ToLower(s) {
	case "raw":
		*f = "raw"
	case "true", "1", "t":
		*f = "true"
	case "false", "0", "f", "":
		*f = "false"
	default:
		return fmt.Errorf("want true, false or raw, not %q", s)
	}
	return nil
}

// Parse reads the command line and, when --config names one, the
// KubeletConfiguration file. Values given as flags win over the file.
// Warnings go to the logger in ctx.
func Parse(ctx context.Context, args []string) (*Options, error) {
	// First pass: only to learn --config, on a scratch copy.
	scratch := newOptions()
	fs := scratch.flagSet()
	version := addVersionFlag(fs)
	fs.Usage = func() { usage(fs) }
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch *version {
	case "true":
		return nil, ErrVersion
	case "raw":
		return nil, ErrVersionRaw
	}
	o := newOptions()
	serializeSet := false // serializeImagePulls given in the file
	if scratch.ConfigFile != "" {
		cfg, off, err := loadFile(ctx, scratch.ConfigFile)
		if err != nil {
			return nil, err
		}
		serializeSet = cfg.SerializeImagePulls != nil
		SetDefaults(cfg)
		o.Config = *cfg
		if off.Autonomy != nil {
			o.Offline.Autonomy = *off.Autonomy
		}
		if off.Secrets != nil {
			o.Offline.Secrets = *off.Secrets
		}
	}
	if scratch.ConfigDir != "" {
		off, set, err := mergeDropIns(ctx, &o.Config, scratch.ConfigDir)
		if err != nil {
			return nil, err
		}
		serializeSet = serializeSet || set
		if off.Autonomy != nil {
			o.Offline.Autonomy = *off.Autonomy
		}
		if off.Secrets != nil {
			o.Offline.Secrets = *off.Secrets
		}
	}
	// enableServer from the file is --enable-server's default.
	if o.Config.EnableServer != nil {
		o.EnableServer = *o.Config.EnableServer
	}
	// Second pass: flags registered with the file's values as their defaults,
	// so only flags actually given override the file.
	fs = o.flagSet()
	addVersionFlag(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.Flags = fs
	if fs.NArg() > 0 {
		// As upstream's kubelet: a stray word is a mistake, not ignored.
		return nil, fmt.Errorf("%q does not take any arguments, got %q", "nodelet", fs.Args())
	}
	// serializeImagePulls defaults from maxParallelImagePulls, as upstream:
	// when only the flag gives the latter, default again.
	if fs.Changed("max-parallel-image-pulls") && !fs.Changed("serialize-image-pulls") && !serializeSet {
		c := &o.Config
		c.SerializeImagePulls = ptr.To(c.MaxParallelImagePulls == nil || *c.MaxParallelImagePulls < 2)
	}
	o.Config.EnableServer = ptr.To(o.EnableServer)
	if err := applyLogging(&o.Config.Logging, fs.Changed("v"), fs.Changed("vmodule")); err != nil {
		return nil, err
	}
	if err := o.complete(); err != nil {
		return nil, err
	}
	return o, nil
}

// addVersionFlag registers upstream's --version on fs.
func addVersionFlag(fs *pflag.FlagSet) *versionFlag {
	v := versionFlag("false")
	fs.Var(&v, "version", "--version, --version=raw prints version information and quits (the kubelet version nodelet implements; raw: the whole version.Info, with nodelet's build).")
	fs.Lookup("version").NoOptDefVal = "true"
	return &v
}

// usage prints --help as upstream's kubelet: what it is, how it is called,
// then every flag (klog's included) in one sorted list.
func usage(fs *pflag.FlagSet) {
	fmt.Fprintf(fs.Output(), `nodelet is a Kubernetes node agent, a drop-in for the kubelet: it takes the
kubelet's flags and KubeletConfiguration file, registers the node, and runs the
pods bound to it (and the static pods of --pod-manifest-path) through the
container runtime (CRI).

Usage:
  nodelet [flags]
  nodelet version [-o json|yaml]

Flags:
%s`, fs.FlagUsages())
}

func newOptions() *Options {
	o := &Options{
		RootDir: DefaultRootDir, EnableServer: true, LocalAPI: true, Offline: Offline{Autonomy: true},
		ContainerGC:   ContainerGCPolicy{MaxPerPodContainer: 1, MaxContainers: -1},
		ImageGCPeriod: 5 * time.Minute, ContainerGCPeriod: time.Minute,
	}
	SetDefaults(&o.Config)
	return o
}

// flagSet binds the upstream kubelet's flag names to o. Every flag's default
// is the value o already holds.
func (o *Options) flagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("nodelet", pflag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	c := &o.Config
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "Path to a kubelet.config.k8s.io/v1beta1 KubeletConfiguration file. Flags override its values.")
	fs.StringVar(&o.ConfigDir, "config-dir", o.ConfigDir, "Path to a directory containing drop-in configuration files that override settings from defaults and the --config file. Drop-in files must have a '.conf' suffix (e.g., '99-kubelet-address.conf'); all .conf files in the directory and its subdirectories are processed in lexical order, other files are ignored. Flags override them.")
	fs.StringVar(&o.KubeconfigPath, "kubeconfig", o.KubeconfigPath, "Path to a kubeconfig for the API server. Empty runs standalone (static pods only).")
	fs.StringVar(&o.BootstrapKubeconfig, "bootstrap-kubeconfig", o.BootstrapKubeconfig, "Kubeconfig with bootstrap credentials: used to request a client certificate (written to --cert-dir, with --kubeconfig pointing at it) when --kubeconfig is missing or its certificate is invalid or expired.")
	fs.BoolVar(&c.RotateCertificates, "rotate-certificates", c.RotateCertificates, "Renew the client certificate through CSRs as it nears expiry.")
	fs.StringVar(&o.HostnameOverride, "hostname-override", o.HostnameOverride, "The name of this node, instead of the hostname.")
	fs.StringVar(&o.RootDir, "root-dir", o.RootDir, "Directory for nodelet's files (pod directories).")
	fs.StringVar(&o.NodeIP, "node-ip", o.NodeIP, "IP address of the node.")
	fs.StringToStringVar(&o.NodeLabels, "node-labels", o.NodeLabels, "Labels to add when registering the node, key=value pairs separated by ','.")
	fs.Var(&taintsFlag{&c.RegisterWithTaints}, "register-with-taints", "Taints to register the node with, key=value:Effect pairs separated by ','.")
	fs.BoolVar(c.RegisterNode, "register-node", *c.RegisterNode, "Register the node with the API server.")
	fs.StringVar(&c.ProviderID, "provider-id", c.ProviderID, "The node's provider ID.")

	// The kubelet API.
	fs.BoolVar(&o.EnableServer, "enable-server", o.EnableServer, "Serve the kubelet API.")
	fs.BoolVar(&o.LocalAPI, "local-api", o.LocalAPI, "Serve the kubelet API without TLS on <root-dir>/nodelet.sock (mode 0600, root only) for the nodelet CLI: nodelet pods, logs, ... (nodelet's flag).")
	fs.BoolVar(&o.Offline.Autonomy, "offline-autonomy", o.Offline.Autonomy, "Keep a local checkpoint of the API pods under --root-dir and run them from it when started without the API server; false behaves like the upstream kubelet (nodelet's flag; config file: offlineAutonomy).")
	fs.BoolVar(&o.Offline.Secrets, "offline-secrets", o.Offline.Secrets, "Let the offline checkpoint keep the Secrets the pods use, in files only root can read (nodelet's flag; config file: offlineSecrets).")
	fs.StringVar(&c.Address, "address", c.Address, "IP address the kubelet API listens on (0.0.0.0 for all).")
	fs.Int32Var(&c.Port, "port", c.Port, "Port of the kubelet API (HTTPS).")
	fs.Int32Var(&c.ReadOnlyPort, "read-only-port", c.ReadOnlyPort, "Port of the unauthenticated read-only API; 0 disables it.")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", c.TLSCertFile, "Serving certificate of the kubelet API; a self-signed one is generated in --cert-dir when empty.")
	fs.StringVar(&c.TLSPrivateKeyFile, "tls-private-key-file", c.TLSPrivateKeyFile, "Key of --tls-cert-file.")
	fs.StringVar(&o.CertDir, "cert-dir", o.CertDir, "Directory of the TLS certificates: bootstrapped and rotated ones, or the generated serving certificate (default <root-dir>/pki).")
	fs.StringVar(&c.TLSMinVersion, "tls-min-version", c.TLSMinVersion, "Minimum TLS version (VersionTLS12, VersionTLS13).")
	fs.StringSliceVar(&c.TLSCipherSuites, "tls-cipher-suites", c.TLSCipherSuites, "TLS cipher suites of the kubelet API (Go names).")
	fs.StringVar(&c.Authentication.X509.ClientCAFile, "client-ca-file", c.Authentication.X509.ClientCAFile, "CA bundle that signs accepted client certificates.")
	fs.BoolVar(c.Authentication.Anonymous.Enabled, "anonymous-auth", *c.Authentication.Anonymous.Enabled, "Accept unauthenticated requests as system:anonymous.")
	fs.BoolVar(c.Authentication.Webhook.Enabled, "authentication-token-webhook", *c.Authentication.Webhook.Enabled, "Authenticate bearer tokens with TokenReview.")
	fs.DurationVar(&c.Authentication.Webhook.CacheTTL.Duration, "authentication-token-webhook-cache-ttl", c.Authentication.Webhook.CacheTTL.Duration, "Cache TTL of TokenReview answers.")
	fs.StringVar((*string)(&c.Authorization.Mode), "authorization-mode", string(c.Authorization.Mode), "AlwaysAllow or Webhook (SubjectAccessReview).")
	fs.DurationVar(&c.Authorization.Webhook.CacheAuthorizedTTL.Duration, "authorization-webhook-cache-authorized-ttl", c.Authorization.Webhook.CacheAuthorizedTTL.Duration, "Cache TTL of allowed SubjectAccessReviews.")
	fs.DurationVar(&c.Authorization.Webhook.CacheUnauthorizedTTL.Duration, "authorization-webhook-cache-unauthorized-ttl", c.Authorization.Webhook.CacheUnauthorizedTTL.Duration, "Cache TTL of denied SubjectAccessReviews.")
	fs.BoolVar(c.EnableDebuggingHandlers, "enable-debugging-handlers", *c.EnableDebuggingHandlers, "Serve logs, exec, attach, port-forward and pprof.")
	fs.StringVar(&c.ContainerLogMaxSize, "container-log-max-size", c.ContainerLogMaxSize, "Size at which a container log is rotated.")
	fs.Int32Var(c.ContainerLogMaxFiles, "container-log-max-files", *c.ContainerLogMaxFiles, "Log files kept per container, the current one included.")

	fs.StringVar(&c.StaticPodPath, "pod-manifest-path", c.StaticPodPath, "Directory of static pod manifests.")
	fs.StringVar(&c.ContainerRuntimeEndpoint, "container-runtime-endpoint", c.ContainerRuntimeEndpoint, "The CRI runtime endpoint, e.g. unix:///run/containerd/containerd.sock.")
	fs.StringVar(&c.ImageServiceEndpoint, "image-service-endpoint", c.ImageServiceEndpoint, "The CRI image service endpoint; defaults to the runtime endpoint.")
	fs.DurationVar(&c.SyncFrequency.Duration, "sync-frequency", c.SyncFrequency.Duration, "Maximum period between synchronizing running containers.")
	fs.DurationVar(&c.FileCheckFrequency.Duration, "file-check-frequency", c.FileCheckFrequency.Duration, "Period of re-reading the static pod directory.")
	fs.StringVar(&c.StaticPodURL, "manifest-url", c.StaticPodURL, "URL for accessing additional Pod specifications to run")
	fs.Var(cliflag.NewColonSeparatedMultimapStringString(&c.StaticPodURLHeader), "manifest-url-header", "Comma-separated list of HTTP headers to use when accessing the url provided to --manifest-url. Multiple headers with the same name will be added in the same order provided. This flag can be repeatedly invoked. For example: --manifest-url-header 'a:hello,b:again,c:world' --manifest-url-header 'b:beautiful'")
	fs.DurationVar(&c.HTTPCheckFrequency.Duration, "http-check-frequency", c.HTTPCheckFrequency.Duration, "Duration between checking http for new data.")
	fs.Int32Var(c.HealthzPort, "healthz-port", *c.HealthzPort, "Port of the plain-http healthz endpoint; 0 disables it.")
	fs.StringVar(&c.HealthzBindAddress, "healthz-bind-address", c.HealthzBindAddress, "Address of the healthz endpoint.")
	fs.Int32Var(&c.MaxPods, "max-pods", c.MaxPods, "Number of pods that can run on this node.")
	fs.StringVar(c.ResolverConfig, "resolv-conf", *c.ResolverConfig, "Resolver configuration file used as the basis for pod DNS.")
	fs.BoolVar(c.SerializeImagePulls, "serialize-image-pulls", *c.SerializeImagePulls, "Pull images one at a time.")
	fs.Var(optionalInt32(&c.MaxParallelImagePulls), "max-parallel-image-pulls", "Maximum number of image pulls in parallel when --serialize-image-pulls=false (unset: no limit). Setting it above 1 alone turns serialized pulls off (nodelet's flag; upstream has it in the config file only).")
	fs.DurationVar(&c.RuntimeRequestTimeout.Duration, "runtime-request-timeout", c.RuntimeRequestTimeout.Duration, "Timeout of runtime requests other than long-running ones (pull, logs, exec, attach).")
	fs.StringVar(&c.ClusterDomain, "cluster-domain", c.ClusterDomain, "Cluster domain for pod DNS search paths.")
	fs.StringSliceVar(&c.ClusterDNS, "cluster-dns", c.ClusterDNS, "Comma-separated DNS server IPs for pods with dnsPolicy ClusterFirst.")
	fs.Var(&durationFlag{&c.NodeStatusUpdateFrequency.Duration}, "node-status-update-frequency", "How often the node status is computed.")
	fs.Var(cliflag.NewMapStringString(&c.SystemReserved), "system-reserved", "Resources reserved for non-Kubernetes components, e.g. cpu=200m,memory=500Mi,ephemeral-storage=1Gi,pid=1000.")
	fs.Var(cliflag.NewMapStringString(&c.KubeReserved), "kube-reserved", "Resources reserved for Kubernetes components, e.g. cpu=200m,memory=500Mi,ephemeral-storage=1Gi,pid=1000.")
	fs.StringSliceVar(&c.EnforceNodeAllocatable, "enforce-node-allocatable", c.EnforceNodeAllocatable, "Levels of node allocatable enforcement: none, pods, system-reserved, system-reserved-compressible, kube-reserved, kube-reserved-compressible (the latter four need --system-reserved-cgroup or --kube-reserved-cgroup).")
	fs.StringVar(&c.SystemReservedCgroup, "system-reserved-cgroup", c.SystemReservedCgroup, "Existing top-level cgroup of the non-Kubernetes components, limited to --system-reserved when enforced, e.g. /system-reserved.")
	fs.StringVar(&c.KubeReservedCgroup, "kube-reserved-cgroup", c.KubeReservedCgroup, "Existing top-level cgroup of the Kubernetes components, limited to --kube-reserved when enforced, e.g. /kube-reserved.")
	fs.Var(cliflag.NewLangleSeparatedMapStringString(&c.EvictionHard), "eviction-hard", "Hard eviction thresholds, e.g. memory.available<1Gi,nodefs.available<10% (replaces the defaults).")
	fs.Var(cliflag.NewLangleSeparatedMapStringString(&c.EvictionSoft), "eviction-soft", "Soft eviction thresholds, e.g. memory.available<1.5Gi; each needs --eviction-soft-grace-period.")
	fs.Var(cliflag.NewMapStringString(&c.EvictionSoftGracePeriod), "eviction-soft-grace-period", "Grace periods of the soft thresholds, e.g. memory.available=1m30s.")
	fs.Var(cliflag.NewMapStringString(&c.EvictionMinimumReclaim), "eviction-minimum-reclaim", "Minimum reclaims once a threshold is met, e.g. imagefs.available=2Gi.")
	fs.Int32Var(&c.EvictionMaxPodGracePeriod, "eviction-max-pod-grace-period", c.EvictionMaxPodGracePeriod, "Longest grace period (s) of pods evicted for a soft threshold; 0 or less: the pod's own.")
	fs.Var(&durationFlag{&c.EvictionPressureTransitionPeriod.Duration}, "eviction-pressure-transition-period", "How long a pressure condition stays after its signal recovers.")
	fs.Var(&durationFlag{&c.VolumeStatsAggPeriod.Duration}, "volume-stats-agg-period", "How often the pods' volumes and ephemeral storage are measured.")
	fs.Int32Var(c.ImageGCHighThresholdPercent, "image-gc-high-threshold", *c.ImageGCHighThresholdPercent, "Percent of the image filesystem used from which unused images are collected (100 disables).")
	fs.Int32Var(c.ImageGCLowThresholdPercent, "image-gc-low-threshold", *c.ImageGCLowThresholdPercent, "Percent of the image filesystem used the collection brings it back to.")
	fs.DurationVar(&c.ImageMinimumGCAge.Duration, "minimum-image-ttl-duration", c.ImageMinimumGCAge.Duration, "Minimum age of an unused image before it is collected.")
	_ = fs.MarkDeprecated("minimum-image-ttl-duration", "use imageMinimumGCAge in the config file")
	fs.DurationVar(&o.ContainerGC.MinAge, "minimum-container-ttl-duration", o.ContainerGC.MinAge, "Minimum age of a dead container before it is collected.")
	fs.IntVar(&o.ContainerGC.MaxPerPodContainer, "maximum-dead-containers-per-container", o.ContainerGC.MaxPerPodContainer, "Dead instances kept per container (less than 0: any number).")
	fs.IntVar(&o.ContainerGC.MaxContainers, "maximum-dead-containers", o.ContainerGC.MaxContainers, "Dead containers kept on the node (less than 0: any number).")
	for _, name := range []string{"minimum-container-ttl-duration", "maximum-dead-containers-per-container", "maximum-dead-containers"} {
		_ = fs.MarkDeprecated(name, "use the eviction settings instead")
	}
	fs.DurationVar(&o.ImageGCPeriod, "image-gc-period", o.ImageGCPeriod, "How often unused images are collected (nodelet's flag; upstream's is fixed at 5m).")
	fs.DurationVar(&o.ContainerGCPeriod, "container-gc-period", o.ContainerGCPeriod, "How often dead containers are collected (nodelet's flag; upstream's is fixed at 1m).")
	fs.StringSliceVar(&c.AllowedUnsafeSysctls, "allowed-unsafe-sysctls", c.AllowedUnsafeSysctls, "Unsafe sysctls or patterns (ending in *) pods may set, besides the safe ones.")
	fs.StringVar(&c.CgroupDriver, "cgroup-driver", c.CgroupDriver, "cgroupfs or systemd.")
	fs.BoolVar(c.CgroupsPerQOS, "cgroups-per-qos", *c.CgroupsPerQOS, "Create the QoS cgroup hierarchy.")
	fs.StringVar(&c.CgroupRoot, "cgroup-root", c.CgroupRoot, "Root cgroup for pods.")
	fs.StringVar(&c.KubeletCgroups, "kubelet-cgroups", c.KubeletCgroups, "Absolute name of the cgroup nodelet moves itself into at start (created when missing); reported as the summary's kubelet system container.")
	fs.StringVar(&c.SystemCgroups, "system-cgroups", c.SystemCgroups, "Absolute name of the cgroup for the node's non-kernel processes outside a cgroup: not supported by nodelet (refused at start).")
	fs.StringVar(&o.CloudProvider, "cloud-provider", o.CloudProvider, "The provider for cloud services. Set to empty string for running with no cloud provider. Set to 'external' for running with an external cloud provider.")
	fs.StringVar(&o.ImageCredentialProviderConfig, "image-credential-provider-config", o.ImageCredentialProviderConfig, "Path to a credential provider plugin config file (JSON/YAML/YML) or a directory of such files (merged in lexicographical order; non-recursive search).")
	fs.StringVar(&o.ImageCredentialProviderBinDir, "image-credential-provider-bin-dir", o.ImageCredentialProviderBinDir, "The path to the directory where credential provider plugin binaries are located.")
	fs.StringVar(&o.RuntimeCgroups, "runtime-cgroups", o.RuntimeCgroups, "Absolute name of the container runtime's cgroup (/system.slice/containerd.service): reported as the summary's runtime system container.")
	fs.BoolVar(c.FailCgroupV1, "fail-cgroupv1", *c.FailCgroupV1, "Refuse to start on a host using cgroup v1 (default true, as upstream; false runs on cgroup v1).")
	fs.BoolVar(c.FailSwapOn, "fail-swap-on", *c.FailSwapOn, "Refuse to start when swap is on (/proc/swaps), as upstream's failSwapOn; false starts with swap on, each container getting memorySwap.swapBehavior (NoSwap by default).")
	fs.BoolVar(c.SeccompDefault, "seccomp-default", *c.SeccompDefault, "Run every container without a seccomp profile of its own (or its pod's) with the runtime's default profile (RuntimeDefault) instead of Unconfined.")
	// Upstream's flags of the remaining configuration fields: each sets its
	// field, which is then honoured or refused at start as the field is
	// (docs/configuration.md), never ignored.
	fs.Var(cliflag.NewMapStringBool(&c.FeatureGates), "feature-gates", "A set of key=value pairs that describe feature gates (upstream's v1.37.2 gates; one nodelet does not act on is refused away from its default).")
	fs.Var(optionalBool(&c.CPUCFSQuota), "cpu-cfs-quota", "Enforce CPU limits with CFS quota.")
	fs.Var(&durationPtrFlag{&c.CPUCFSQuotaPeriod}, "cpu-cfs-quota-period", "CFS quota period of the containers' CPU limits.")
	fs.Var(optionalInt32(&c.EventRecordQPS), "event-qps", "Events per second the node may create (0: no limit).")
	fs.Int32Var(&c.EventBurst, "event-burst", c.EventBurst, "Burst of events above event-qps.")
	fs.Var(optionalInt32(&c.KubeAPIQPS), "kube-api-qps", "Requests per second to the API server.")
	fs.Int32Var(&c.KubeAPIBurst, "kube-api-burst", c.KubeAPIBurst, "Burst of requests to the API server.")
	fs.StringVar(&c.ContentType, "kube-api-content-type", c.ContentType, "Content type of requests to the API server.")
	fs.StringVar(&c.HairpinMode, "hairpin-mode", c.HairpinMode, "Deprecated upstream and without effect there: validated, then ignored with a warning.")
	fs.Int64Var(&c.MaxOpenFiles, "max-open-files", c.MaxOpenFiles, "Open files limit of nodelet's own process.")
	fs.Var(optionalInt32(&c.OOMScoreAdj), "oom-score-adj", "oom_score_adj of nodelet's own process, in [-1000, 1000].")
	fs.StringVar(&c.PodCIDR, "pod-cidr", c.PodCIDR, "The pods' CIDR range, given to the runtime at start (the Node's spec.podCIDRs replace it in cluster mode).")
	fs.Var(optionalInt64(&c.PodPidsLimit), "pod-max-pids", "Maximum number of processes per pod (-1: no limit).")
	fs.BoolVar(&c.ServerTLSBootstrap, "rotate-server-certificates", c.ServerTLSBootstrap, "Request and renew the serving certificate through CSRs (serverTLSBootstrap).")
	fs.Var(optionalInt32(&c.NodeStatusMaxImages), "node-status-max-images", "Images reported in the Node's status.images.")
	fs.DurationVar(&c.StreamingConnectionIdleTimeout.Duration, "streaming-connection-idle-timeout", c.StreamingConnectionIdleTimeout.Duration, "Deprecated upstream: validated, then ignored with a warning.")
	fs.BoolVar(&c.KernelMemcgNotification, "kernel-memcg-notification", c.KernelMemcgNotification, "Use the kernel's memory notifications for eviction (nodelet always does).")
	fs.StringVar(&c.CPUManagerPolicy, "cpu-manager-policy", c.CPUManagerPolicy, "CPU manager policy: none or static.")
	fs.Var(cliflag.NewMapStringStringNoSplit(&c.CPUManagerPolicyOptions), "cpu-manager-policy-options", "A set of key=value CPU Manager policy options to use, to fine tune their behaviour. If not supplied, keep the default behaviour.")
	fs.DurationVar(&c.CPUManagerReconcilePeriod.Duration, "cpu-manager-reconcile-period", c.CPUManagerReconcilePeriod.Duration, "How often the CPU manager writes the shared pool's cpuset to the running containers.")
	fs.StringVar(&c.MemoryManagerPolicy, "memory-manager-policy", c.MemoryManagerPolicy, "Memory Manager policy to use. Possible values: 'None', 'Static'.")
	fs.Var(&reservedMemoryFlag{value: &c.ReservedMemory}, "reserved-memory", "A comma separated list of memory reservations for NUMA nodes. (e.g. --reserved-memory 0:memory=1Gi,hugepages-1M=2Gi --reserved-memory 1:memory=2Gi). The total sum for each memory type should be equal to the sum of kube-reserved, system-reserved and eviction-threshold.")
	fs.StringVar(&c.TopologyManagerPolicy, "topology-manager-policy", c.TopologyManagerPolicy, "Topology Manager policy to use. Possible values: 'none', 'best-effort', 'restricted', 'single-numa-node'.")
	fs.StringVar(&c.TopologyManagerScope, "topology-manager-scope", c.TopologyManagerScope, "Scope to which topology hints applied. Topology Manager collects hints from Hint Providers and applies them to defined scope to ensure the pod admission. Possible values: 'container', 'pod'.")
	fs.Var(cliflag.NewMapStringString(&c.TopologyManagerPolicyOptions), "topology-manager-policy-options", "A set of key=value Topology Manager policy options to use, to fine tune their behaviour: prefer-closest-numa-nodes, max-allowable-numa-nodes.")
	fs.StringVar(&c.ReservedSystemCPUs, "reserved-cpus", c.ReservedSystemCPUs, "CPUs reserved for the system (a cpuset), kept out of exclusive allocation; overrides the cpu of kubeReserved and systemReserved.")
	fs.Var(cliflag.NewMapStringString(&c.QOSReserved), "qos-reserved", "Memory reserved per QoS class: refused (not implemented).")
	fs.Int32Var(&c.PodsPerCore, "pods-per-core", c.PodsPerCore, "Pods per core: refused away from 0 (not implemented).")
	fs.BoolVar(&c.ProtectKernelDefaults, "protect-kernel-defaults", c.ProtectKernelDefaults, "Refused when true (not implemented).")
	fs.Var(optionalBool(&c.MakeIPTablesUtilChains), "make-iptables-util-chains", "Refused when true except as upstream's default (nodelet makes no iptables chains).")
	fs.Var(optionalInt32(&c.RegistryPullQPS), "registry-qps", "Image pull rate limit: only 0 (pulls are not rate-limited).")
	fs.Int32Var(&c.RegistryBurst, "registry-burst", c.RegistryBurst, "Image pull burst: refused (pulls are not rate-limited).")
	fs.StringVar(&c.VolumePluginDir, "volume-plugin-dir", c.VolumePluginDir, "FlexVolume plugin directory: refused (FlexVolume is not implemented).")
	fs.Var(optionalBool(&c.LocalStorageCapacityIsolation), "local-storage-capacity-isolation", "Refused when false (nodelet always isolates local storage).")
	fs.Var(optionalBool(&c.EnableControllerAttachDetach), "enable-controller-attach-detach", "Refused when false (the attach/detach controller attaches volumes).")
	fs.BoolVar(&c.EnableContentionProfiling, "contention-profiling", c.EnableContentionProfiling, "Refused (contention profiling is not implemented).")
	fs.StringVar(&c.Logging.Format, "logging-format", c.Logging.Format, "Log format: only text.")
	for _, name := range []string{"cpu-cfs-quota", "make-iptables-util-chains", "local-storage-capacity-isolation", "enable-controller-attach-detach"} {
		fs.Lookup(name).NoOptDefVal = "true"
	}
	// Deprecated upstream flags accepted for compatibility.
	var ignored string
	fs.StringVar(&ignored, "pod-infra-container-image", "", "Ignored: the runtime's sandbox image is used.")
	_ = fs.MarkDeprecated("pod-infra-container-image", "the sandbox image is configured in the container runtime")

	klogFlags := klogFlagSet()
	fs.AddGoFlagSet(klogFlags)
	return fs
}

// taintsFlag parses --register-with-taints: key=value:Effect,key:Effect.
type taintsFlag struct{ taints *[]v1.Taint }

func (f *taintsFlag) String() string {
	var parts []string
	for _, t := range *f.taints {
		parts = append(parts, t.ToString())
	}
	return strings.Join(parts, ",")
}

func (f *taintsFlag) Set(s string) error {
	var out []v1.Taint
	for _, spec := range strings.Split(s, ",") {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		kv, effect, ok := strings.Cut(spec, ":")
		if !ok {
			return fmt.Errorf("taint %q: want key[=value]:Effect", spec)
		}
		key, value, _ := strings.Cut(kv, "=")
		switch v1.TaintEffect(effect) {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			return fmt.Errorf("taint %q: unknown effect %q", spec, effect)
		}
		out = append(out, v1.Taint{Key: key, Value: value, Effect: v1.TaintEffect(effect)})
	}
	*f.taints = out
	return nil
}

func (f *taintsFlag) Type() string { return "taints" }

// reservedMemoryFlag parses --reserved-memory as upstream's
// ReservedMemoryVar: "0:memory=1Gi,hugepages-1Gi=2Gi;1:memory=2Gi", each
// occurrence appended.
type reservedMemoryFlag struct {
	value *[]kubeletv1beta1.MemoryReservation
	set   bool
}

func (f *reservedMemoryFlag) String() string {
	if f == nil || f.value == nil {
		return ""
	}
	var out []string
	for _, r := range *f.value {
		var limits []string
		for name, q := range r.Limits {
			limits = append(limits, fmt.Sprintf("%s=%s", name, q.String()))
		}
		slices.Sort(limits)
		out = append(out, fmt.Sprintf("%d:%s", r.NumaNode, strings.Join(limits, ",")))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func (f *reservedMemoryFlag) Set(s string) error {
	if s == "" {
		*f.value = nil
		return nil
	}
	if !f.set {
		*f.value, f.set = nil, true // the flag replaces the file's
	}
	for _, reservation := range strings.Split(s, ";") {
		node, limits, ok := strings.Cut(reservation, ":")
		if !ok || strings.Contains(limits, ":") {
			return fmt.Errorf("the reserved memory has incorrect format, expected numaNodeID:type=quantity[,type=quantity...], got %s", reservation)
		}
		id, err := strconv.Atoi(node)
		if err != nil {
			return fmt.Errorf("failed to convert the NUMA node ID, expected integer, got %s", node)
		}
		r := kubeletv1beta1.MemoryReservation{NumaNode: int32(id), Limits: v1.ResourceList{}}
		for _, limit := range strings.Split(limits, ",") {
			name, quantity, ok := strings.Cut(limit, "=")
			if !ok || strings.Contains(quantity, "=") {
				return fmt.Errorf("the reserved limit has incorrect value, expected type=quantity, got %s", limit)
			}
			if name != string(v1.ResourceMemory) && !strings.HasPrefix(name, v1.ResourceHugePagesPrefix) {
				return fmt.Errorf("memory type conversion error, unknown type: %q", name)
			}
			q, err := resource.ParseQuantity(quantity)
			if err != nil {
				return fmt.Errorf("failed to parse the quantity: %s", quantity)
			}
			r.Limits[v1.ResourceName(name)] = q
		}
		*f.value = append(*f.value, r)
	}
	return nil
}

func (f *reservedMemoryFlag) Type() string { return "reserved-memory" }

// durationFlag is a flag.Value over a time.Duration held in a config struct.
type durationFlag struct{ d *time.Duration }

func (f *durationFlag) String() string {
	if f.d == nil {
		return "0s"
	}
	return f.d.String()
}
func (f *durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}
func (f *durationFlag) Type() string { return "duration" }

// optionalFlag is a flag.Value over a pointer config field that stays nil
// unless the flag is given.
type optionalFlag[T any] struct {
	p     **T
	parse func(string) (T, error)
	typ   string
}

func (f *optionalFlag[T]) String() string {
	if f.p == nil || *f.p == nil {
		return ""
	}
	return fmt.Sprint(**f.p)
}

func (f *optionalFlag[T]) Set(s string) error {
	v, err := f.parse(s)
	if err != nil {
		return err
	}
	*f.p = &v
	return nil
}

func (f *optionalFlag[T]) Type() string { return f.typ }

func optionalBool(p **bool) *optionalFlag[bool] {
	return &optionalFlag[bool]{p: p, parse: strconv.ParseBool, typ: "bool"}
}

func optionalInt32(p **int32) *optionalFlag[int32] {
	return &optionalFlag[int32]{p: p, typ: "int32", parse: func(s string) (int32, error) {
		v, err := strconv.ParseInt(s, 10, 32)
		return int32(v), err
	}}
}

func optionalInt64(p **int64) *optionalFlag[int64] {
	return &optionalFlag[int64]{p: p, typ: "int64", parse: func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }}
}

// durationPtrFlag is a flag.Value over a *metav1.Duration config field.
type durationPtrFlag struct{ d **metav1.Duration }

func (f *durationPtrFlag) String() string {
	if f.d == nil || *f.d == nil {
		return ""
	}
	return (*f.d).Duration.String()
}
func (f *durationPtrFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*f.d = &metav1.Duration{Duration: d}
	return nil
}
func (f *durationPtrFlag) Type() string { return "duration" }

// ExternalCloudProvider is --cloud-provider's one accepted value.
const ExternalCloudProvider = "external"

func (o *Options) complete() error {
	name := o.HostnameOverride
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("hostname: %w", err)
		}
		name = h
	}
	o.NodeName = strings.ToLower(strings.TrimSpace(name))
	if o.CertDir == "" {
		o.CertDir = rootdir.Dir(o.RootDir).PKI()
	}
	if o.Config.ImageServiceEndpoint == "" {
		o.Config.ImageServiceEndpoint = o.Config.ContainerRuntimeEndpoint
	}
	if o.CloudProvider != "" && o.CloudProvider != ExternalCloudProvider {
		// Upstream's cloudprovider.ErrorForDisabledProvider.
		return fmt.Errorf("cloud provider %q was specified, but built-in cloud providers are disabled. Please set --cloud-provider=external and migrate to an external cloud provider", o.CloudProvider)
	}
	if err := Validate(&o.Config); err != nil {
		return err
	}
	ReservedCPUsOverride(&o.Config)
	return nil
}

// ReservedCPUsOverride applies reservedSystemCPUs to the reservations, as
// upstream's kubelet does at start: their count becomes
// systemReserved.cpu, kubeReserved.cpu is dropped (allocatable and the
// static CPU manager's reservation follow).
func ReservedCPUsOverride(c *kubeletv1beta1.KubeletConfiguration) {
	set, err := cpuset.Parse(c.ReservedSystemCPUs)
	if err != nil || set.IsEmpty() {
		return
	}
	delete(c.KubeReserved, "cpu")
	if c.SystemReserved == nil {
		c.SystemReserved = map[string]string{}
	}
	c.SystemReserved["cpu"] = strconv.Itoa(set.Size())
}

// LoadFile reads a KubeletConfiguration file and defaults it. Unknown or
// duplicate fields are a warning, not an error, as upstream.
func LoadFile(ctx context.Context, path string) (*kubeletv1beta1.KubeletConfiguration, error) {
	cfg, _, err := loadFile(ctx, path)
	if err != nil {
		return nil, err
	}
	SetDefaults(cfg)
	return cfg, nil
}

// loadFile reads a KubeletConfiguration file without defaulting it, and
// nodelet's own fields in it.
func loadFile(ctx context.Context, path string) (*kubeletv1beta1.KubeletConfiguration, offlineFields, error) {
	var off offlineFields
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, off, fmt.Errorf("read kubelet config file: %w", err)
	}
	data, off, err = splitOffline(data)
	if err != nil {
		return nil, off, fmt.Errorf("kubelet config file %s: %w", path, err)
	}
	cfg := &kubeletv1beta1.KubeletConfiguration{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		cfg = &kubeletv1beta1.KubeletConfiguration{}
		if lerr := yaml.Unmarshal(data, cfg); lerr != nil {
			return nil, off, fmt.Errorf("kubelet config file %s: %w", path, lerr)
		}
		klog.FromContext(ctx).Info("Warning: kubelet config file has fields nodelet does not know; they are ignored", "path", path, "err", err)
	}
	if cfg.Kind != "KubeletConfiguration" || cfg.APIVersion != kubeletv1beta1.SchemeGroupVersion.String() {
		return nil, off, fmt.Errorf("kubelet config file %s: want kind KubeletConfiguration, apiVersion %s; got kind %q, apiVersion %q",
			path, kubeletv1beta1.SchemeGroupVersion, cfg.Kind, cfg.APIVersion)
	}
	return cfg, off, nil
}

// splitOffline takes nodelet's own fields (offlineFields) out of a config
// file, so the rest is decoded strictly as upstream's KubeletConfiguration.
func splitOffline(data []byte) ([]byte, offlineFields, error) {
	var off offlineFields
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil || m == nil {
		return data, off, nil // reported by the strict decoding
	}
	if err := yaml.Unmarshal(data, &off); err != nil {
		return nil, off, fmt.Errorf("offlineAutonomy, offlineSecrets: %w", err)
	}
	if off.Autonomy == nil && off.Secrets == nil {
		return data, off, nil
	}
	delete(m, "offlineAutonomy")
	delete(m, "offlineSecrets")
	rest, err := yaml.Marshal(m)
	return rest, off, err
}

// SetDefaults fills the fields nodelet uses with the upstream kubelet's
// v1beta1 defaults.
func SetDefaults(c *kubeletv1beta1.KubeletConfiguration) {
	c.APIVersion = kubeletv1beta1.SchemeGroupVersion.String()
	c.Kind = "KubeletConfiguration"
	defDuration(&c.SyncFrequency, time.Minute)
	defDuration(&c.FileCheckFrequency, 20*time.Second)
	defDuration(&c.HTTPCheckFrequency, 20*time.Second)
	defDuration(&c.RuntimeRequestTimeout, 2*time.Minute)
	defDuration(&c.NodeStatusUpdateFrequency, 10*time.Second)
	defDuration(&c.NodeStatusReportFrequency, 5*time.Minute)
	defDuration(&c.ImageMinimumGCAge, 2*time.Minute)
	if c.ImageGCHighThresholdPercent == nil {
		c.ImageGCHighThresholdPercent = ptr.To[int32](85)
	}
	if c.ImageGCLowThresholdPercent == nil {
		c.ImageGCLowThresholdPercent = ptr.To[int32](80)
	}
	defDuration(&c.StreamingConnectionIdleTimeout, 4*time.Hour)
	defDuration(&c.EvictionPressureTransitionPeriod, 5*time.Minute)
	defDuration(&c.VolumeStatsAggPeriod, time.Minute)
	if c.CPUCFSQuotaPeriod == nil {
		c.CPUCFSQuotaPeriod = &metav1.Duration{Duration: 100 * time.Millisecond}
	}
	if c.ContainerLogMonitorInterval == nil {
		c.ContainerLogMonitorInterval = &metav1.Duration{Duration: 10 * time.Second}
	}
	if c.Address == "" {
		c.Address = "0.0.0.0"
	}
	if c.Port == 0 {
		c.Port = 10250
	}
	if c.HealthzPort == nil {
		c.HealthzPort = ptr.To[int32](10248)
	}
	if c.HealthzBindAddress == "" {
		c.HealthzBindAddress = "127.0.0.1"
	}
	if c.ContainerRuntimeEndpoint == "" {
		c.ContainerRuntimeEndpoint = DefaultContainerRuntimeEndpoint
	}
	if c.PodLogsDir == "" {
		c.PodLogsDir = DefaultPodLogsDir
	}
	if c.MaxPods == 0 {
		c.MaxPods = 110
	}
	if c.PodPidsLimit == nil {
		c.PodPidsLimit = ptr.To[int64](-1)
	}
	if c.ResolverConfig == nil {
		c.ResolverConfig = ptr.To("/etc/resolv.conf")
	}
	if c.SerializeImagePulls == nil {
		c.SerializeImagePulls = ptr.To(c.MaxParallelImagePulls == nil || *c.MaxParallelImagePulls <= 1)
	}
	// registryPullQPS and registryBurst are left unset: nodelet does not
	// rate-limit pulls, and upstream's defaults (5, 10) set explicitly are
	// warned about (fieldStatuses).
	if c.EventRecordQPS == nil {
		c.EventRecordQPS = ptr.To[int32](50)
	}
	if c.EventBurst == 0 {
		c.EventBurst = 100
	}
	if c.KubeAPIQPS == nil {
		c.KubeAPIQPS = ptr.To[int32](50)
	}
	if c.KubeAPIBurst == 0 {
		c.KubeAPIBurst = 100
	}
	if c.NodeLeaseDurationSeconds == 0 {
		c.NodeLeaseDurationSeconds = 40
	}
	if c.CgroupsPerQOS == nil {
		c.CgroupsPerQOS = ptr.To(true)
	}
	if c.CgroupDriver == "" {
		c.CgroupDriver = "cgroupfs"
	}
	if c.FailCgroupV1 == nil {
		c.FailCgroupV1 = ptr.To(true)
	}
	if c.FailSwapOn == nil {
		c.FailSwapOn = ptr.To(true)
	}
	if c.SeccompDefault == nil {
		c.SeccompDefault = ptr.To(false)
	}
	if c.OOMScoreAdj == nil {
		c.OOMScoreAdj = ptr.To[int32](-999)
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = 1000000
	}
	// KubeletCrashLoopBackOffMax (beta, on by default): upstream's
	// default maximum, the restart back-off's own.
	if on, set := c.FeatureGates["KubeletCrashLoopBackOffMax"]; (on || !set) && c.CrashLoopBackOff.MaxContainerRestartPeriod == nil {
		c.CrashLoopBackOff.MaxContainerRestartPeriod = &metav1.Duration{Duration: 300 * time.Second}
	}
	// KubeletEnsureSecretPulledImages (beta, on by default): upstream's
	// default policy.
	if EnsureSecretPulledImages(c) && c.ImagePullCredentialsVerificationPolicy == "" {
		c.ImagePullCredentialsVerificationPolicy = kubeletv1beta1.NeverVerifyPreloadedImages
	}
	if c.CPUCFSQuota == nil {
		c.CPUCFSQuota = ptr.To(true)
	}
	if c.HairpinMode == "" {
		c.HairpinMode = kubeletv1beta1.PromiscuousBridge
	}
	if c.ContainerLogMaxSize == "" {
		c.ContainerLogMaxSize = "10Mi"
	}
	if c.ContainerLogMaxFiles == nil {
		c.ContainerLogMaxFiles = ptr.To[int32](5)
	}
	if c.MergeDefaultEvictionSettings == nil {
		c.MergeDefaultEvictionSettings = ptr.To(false)
	}
	// Upstream's Linux defaults, and its rule: an evictionHard that is set
	// keeps only what it names unless mergeDefaultEvictionSettings.
	c.EvictionHard = eviction.MergeDefaults(c.EvictionHard, *c.MergeDefaultEvictionSettings)
	if c.EnforceNodeAllocatable == nil {
		c.EnforceNodeAllocatable = []string{"pods"}
	}
	if c.RegisterNode == nil {
		c.RegisterNode = ptr.To(true)
	}
	if c.EnableSystemLogHandler == nil {
		c.EnableSystemLogHandler = ptr.To(true)
	}
	if c.ContainerLogMaxWorkers == nil {
		c.ContainerLogMaxWorkers = ptr.To[int32](1)
	}
	if c.EnableDebuggingHandlers == nil {
		c.EnableDebuggingHandlers = ptr.To(true)
	}
	if c.Authentication.Anonymous.Enabled == nil {
		c.Authentication.Anonymous.Enabled = ptr.To(false)
	}
	if c.Authentication.Webhook.Enabled == nil {
		c.Authentication.Webhook.Enabled = ptr.To(true)
	}
	defDuration(&c.Authentication.Webhook.CacheTTL, 2*time.Minute)
	if c.Authorization.Mode == "" {
		c.Authorization.Mode = kubeletv1beta1.KubeletAuthorizationModeWebhook
	}
	defDuration(&c.Authorization.Webhook.CacheAuthorizedTTL, 5*time.Minute)
	defDuration(&c.Authorization.Webhook.CacheUnauthorizedTTL, 30*time.Second)
}

func defDuration(d *metav1.Duration, v time.Duration) {
	if d.Duration == 0 {
		d.Duration = v
	}
}

// CrashLoopBackOffMax is the longest container restart back-off the
// configuration asks for (0: the runtime's default, the feature gate
// KubeletCrashLoopBackOffMax being off).
func CrashLoopBackOffMax(c *kubeletv1beta1.KubeletConfiguration) time.Duration {
	if p := c.CrashLoopBackOff.MaxContainerRestartPeriod; p != nil {
		return p.Duration
	}
	return 0
}

// Validate refuses configurations nodelet cannot run with.
func Validate(c *kubeletv1beta1.KubeletConfiguration) error {
	var errs []error
	if c.SyncFrequency.Duration <= 0 {
		errs = append(errs, fmt.Errorf("syncFrequency must be positive, got %v", c.SyncFrequency.Duration))
	}
	if c.FileCheckFrequency.Duration <= 0 {
		errs = append(errs, fmt.Errorf("fileCheckFrequency must be positive, got %v", c.FileCheckFrequency.Duration))
	}
	if c.StaticPodURL != "" {
		if u, err := url.Parse(c.StaticPodURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("staticPodURL %q is not an http or https URL", c.StaticPodURL))
		}
		if c.HTTPCheckFrequency.Duration <= 0 {
			errs = append(errs, fmt.Errorf("httpCheckFrequency must be positive with a staticPodURL, got %v", c.HTTPCheckFrequency.Duration))
		}
	}
	// As upstream's validation, its messages.
	if c.MaxOpenFiles < 0 {
		errs = append(errs, fmt.Errorf("invalid configuration: maxOpenFiles (--max-open-files) %v must not be a negative number", c.MaxOpenFiles))
	}
	if c.OOMScoreAdj != nil && (*c.OOMScoreAdj < -1000 || *c.OOMScoreAdj > 1000) {
		errs = append(errs, fmt.Errorf("invalid configuration: oomScoreAdj (--oom-score-adj) %v must be between -1000 and 1000, inclusive", *c.OOMScoreAdj))
	}
	// The read-only port is served by the kubelet API's server here.
	if c.EnableServer != nil && !*c.EnableServer && c.ReadOnlyPort > 0 {
		errs = append(errs, fmt.Errorf("readOnlyPort %d with enableServer false is not supported by nodelet (it serves the read-only port with the kubelet API); set readOnlyPort to 0 or enableServer to true", c.ReadOnlyPort))
	}
	errs = append(errs, validateEnforceNodeAllocatable(c)...)
	errs = append(errs, validateShutdown(c)...)
	errs = append(errs, validateCPUManager(c)...)
	errs = append(errs, validateMemoryManager(c)...)
	errs = append(errs, validateTopologyManager(c)...)
	errs = append(errs, checkUnsupported(c)...)
	// As upstream's validation, its messages.
	if on, set := c.FeatureGates["KubeletCrashLoopBackOffMax"]; on || !set {
		if p := c.CrashLoopBackOff.MaxContainerRestartPeriod; p != nil && (p.Duration < time.Second || p.Duration > 300*time.Second) {
			errs = append(errs, fmt.Errorf("invalid configuration: CrashLoopBackOff.MaxContainerRestartPeriod (got: %v seconds) must be set between 1s and 300s", p.Duration.Seconds()))
		}
	} else if c.CrashLoopBackOff.MaxContainerRestartPeriod != nil {
		errs = append(errs, fmt.Errorf("invalid configuration: FeatureGate KubeletCrashLoopBackOffMax not enabled, CrashLoopBackOff.MaxContainerRestartPeriod must not be set"))
	}
	if c.MaxPods < 0 {
		errs = append(errs, fmt.Errorf("maxPods must not be negative, got %d", c.MaxPods))
	}
	if c.Port < 1 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("port %d out of range", c.Port))
	}
	if c.ReadOnlyPort < 0 || c.ReadOnlyPort > 65535 {
		errs = append(errs, fmt.Errorf("readOnlyPort %d out of range", c.ReadOnlyPort))
	}
	if q, err := resource.ParseQuantity(c.ContainerLogMaxSize); err != nil || q.Sign() <= 0 {
		errs = append(errs, fmt.Errorf("containerLogMaxSize %q is not a positive quantity", c.ContainerLogMaxSize))
	}
	if *c.ContainerLogMaxFiles < 2 {
		errs = append(errs, fmt.Errorf("containerLogMaxFiles must be at least 2, got %d", *c.ContainerLogMaxFiles))
	}
	switch c.Authorization.Mode {
	case kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow, kubeletv1beta1.KubeletAuthorizationModeWebhook:
	default:
		errs = append(errs, fmt.Errorf("authorization.mode %q is not supported (AlwaysAllow, Webhook)", c.Authorization.Mode))
	}
	if (c.TLSCertFile == "") != (c.TLSPrivateKeyFile == "") {
		errs = append(errs, fmt.Errorf("tlsCertFile and tlsPrivateKeyFile go together"))
	}
	if *c.HealthzPort < 0 || *c.HealthzPort > 65535 {
		errs = append(errs, fmt.Errorf("healthzPort %d out of range", *c.HealthzPort))
	}
	if !strings.HasPrefix(c.PodLogsDir, "/") {
		errs = append(errs, fmt.Errorf("podLogsDir must be an absolute path, got %q", c.PodLogsDir))
	}
	if c.ContainerRuntimeEndpoint == "" {
		errs = append(errs, errors.New("containerRuntimeEndpoint must be set"))
	}
	// As upstream's validation.
	if h, l := *c.ImageGCHighThresholdPercent, *c.ImageGCLowThresholdPercent; h < 0 || h > 100 || l < 0 || l > 100 {
		errs = append(errs, fmt.Errorf("imageGCHighThresholdPercent (%d) and imageGCLowThresholdPercent (%d) must be between 0 and 100", h, l))
	} else if l >= h {
		errs = append(errs, fmt.Errorf("imageGCLowThresholdPercent (--image-gc-low-threshold) %d must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) %d", l, h))
	}
	if c.ImageMaximumGCAge.Duration != 0 && c.ImageMaximumGCAge.Duration <= c.ImageMinimumGCAge.Duration {
		errs = append(errs, fmt.Errorf("imageMaximumGCAge %v must be above imageMinimumGCAge %v", c.ImageMaximumGCAge.Duration, c.ImageMinimumGCAge.Duration))
	}
	if c.MaxParallelImagePulls != nil && *c.MaxParallelImagePulls < 1 {
		errs = append(errs, fmt.Errorf("maxParallelImagePulls %d must be a positive number", *c.MaxParallelImagePulls))
	}
	if *c.SerializeImagePulls && c.MaxParallelImagePulls != nil && *c.MaxParallelImagePulls > 1 {
		errs = append(errs, errors.New("maxParallelImagePulls cannot be larger than 1 unless serializeImagePulls (--serialize-image-pulls) is set to false"))
	}
	switch c.MemorySwap.SwapBehavior {
	case "", "NoSwap", "LimitedSwap":
	default: // As upstream (NodeSwap is GA).
		errs = append(errs, fmt.Errorf("invalid configuration: memorySwap.swapBehavior %q must be one of: \"\", %q or %q", c.MemorySwap.SwapBehavior, "LimitedSwap", "NoSwap"))
	}
	// As upstream; then nodelet's own refusal: it does not move the node's
	// processes into a system cgroup.
	if c.SystemCgroups != "" && c.CgroupRoot == "" {
		errs = append(errs, errors.New("invalid configuration: systemCgroups (--system-cgroups) was specified and cgroupRoot (--cgroup-root) was not specified"))
	} else if c.SystemCgroups != "" {
		errs = append(errs, fmt.Errorf("systemCgroups (--system-cgroups) %q is not supported by nodelet: it does not move the node's processes into a system cgroup; unset it (systemd nodes keep them in their slices)", c.SystemCgroups))
	}
	if c.KubeletCgroups != "" && !strings.HasPrefix(c.KubeletCgroups, "/") {
		errs = append(errs, fmt.Errorf("kubeletCgroups (--kubelet-cgroups) must be an absolute cgroup name, got %q", c.KubeletCgroups))
	}
	// NodeLogQuery is GA and locked on: only the handler must be on.
	if ptr.Deref(c.EnableSystemLogQuery, false) && !ptr.Deref(c.EnableSystemLogHandler, true) {
		errs = append(errs, errors.New("invalid configuration: enableSystemLogHandler is required for enableSystemLogQuery"))
	}
	if c.CgroupDriver != "cgroupfs" && c.CgroupDriver != "systemd" {
		errs = append(errs, fmt.Errorf("cgroupDriver must be cgroupfs or systemd, got %q", c.CgroupDriver))
	}
	return errors.Join(errs...)
}

// validateEnforceNodeAllocatable checks enforceNodeAllocatable as upstream
// does, with its messages.
func validateEnforceNodeAllocatable(c *kubeletv1beta1.KubeletConfiguration) []error {
	const (
		pods, none                 = "pods", "none"
		system, systemCompressible = "system-reserved", "system-reserved-compressible"
		kube, kubeCompressible     = "kube-reserved", "kube-reserved-compressible"
		key                        = "enforceNodeAllocatable (--enforce-node-allocatable)"
	)
	var errs []error
	has := map[string]bool{}
	for _, v := range c.EnforceNodeAllocatable {
		has[v] = true
	}
	if has[systemCompressible] && has[system] {
		errs = append(errs, fmt.Errorf("invalid configuration: both %q and %q cannot be specified together in %s", system, systemCompressible, key))
	}
	if has[kubeCompressible] && has[kube] {
		errs = append(errs, fmt.Errorf("invalid configuration: both %q and %q cannot be specified together in %s", kube, kubeCompressible, key))
	}
	seen := map[string]bool{}
	for _, v := range c.EnforceNodeAllocatable {
		if seen[v] {
			errs = append(errs, fmt.Errorf("invalid configuration: duplicated enforcements %q in %s", v, key))
			continue
		}
		seen[v] = true
		switch v {
		case pods:
		case system, systemCompressible:
			if c.SystemReservedCgroup == "" {
				errs = append(errs, fmt.Errorf("invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be specified when %q or %q included in %s", system, systemCompressible, key))
			}
		case kube, kubeCompressible:
			if c.KubeReservedCgroup == "" {
				errs = append(errs, fmt.Errorf("invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified when %q or %q included in %s", kube, kubeCompressible, key))
			}
		case none:
			if len(c.EnforceNodeAllocatable) > 1 {
				errs = append(errs, fmt.Errorf("invalid configuration: %s may not contain additional enforcements when %q is specified", key, none))
			}
			continue
		default:
			errs = append(errs, fmt.Errorf("invalid configuration: option %q specified for %s. Valid options are %q, %q, %q, %q, %q or %q",
				v, key, pods, system, systemCompressible, kube, kubeCompressible, none))
			continue
		}
		if c.CgroupsPerQOS != nil && !*c.CgroupsPerQOS {
			errs = append(errs, fmt.Errorf("invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true when %q contained in %s", v, key))
		}
	}
	return errs
}

// validateShutdown checks the graceful node shutdown settings as upstream
// does, with its messages.
func validateShutdown(c *kubeletv1beta1.KubeletConfiguration) []error {
	var errs []error
	period, critical := c.ShutdownGracePeriod.Duration, c.ShutdownGracePeriodCriticalPods.Duration
	if critical > period {
		errs = append(errs, fmt.Errorf("invalid configuration: shutdownGracePeriodCriticalPods %v must be <= shutdownGracePeriod %v", critical, period))
	}
	if period < 0 || (period > 0 && period < time.Second) {
		errs = append(errs, fmt.Errorf("invalid configuration: shutdownGracePeriod %v must be either zero or otherwise >= 1 sec", period))
	}
	if critical < 0 || (critical > 0 && critical < time.Second) {
		errs = append(errs, fmt.Errorf("invalid configuration: shutdownGracePeriodCriticalPods %v must be either zero or otherwise >= 1 sec", critical))
	}
	gate := func(name string) bool { on, set := c.FeatureGates[name]; return on || !set } // both beta, on
	if (period > 0 || critical > 0) && !gate("GracefulNodeShutdown") {
		errs = append(errs, errors.New("invalid configuration: specifying shutdownGracePeriod or shutdownGracePeriodCriticalPods requires feature gate GracefulNodeShutdown"))
	}
	switch {
	case !gate("GracefulNodeShutdownBasedOnPodPriority") && len(c.ShutdownGracePeriodByPodPriority) != 0:
		errs = append(errs, errors.New("invalid configuration: Specifying shutdownGracePeriodByPodPriority requires feature gate GracefulNodeShutdownBasedOnPodPriority"))
	case len(c.ShutdownGracePeriodByPodPriority) != 0 && (period > 0 || critical > 0):
		errs = append(errs, errors.New("invalid configuration: Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time"))
	}
	return errs
}

// validateCPUManager checks the CPU manager's settings as upstream's
// validation and manager do, with their messages.
// validateTopologyManager is upstream's validation of the policy, the
// scope and the options.
func validateTopologyManager(c *kubeletv1beta1.KubeletConfiguration) []error {
	var errs []error
	policies := []string{topologymanager.PolicyNone, topologymanager.PolicyBestEffort, topologymanager.PolicyRestricted, topologymanager.PolicySingleNumaNode}
	if c.TopologyManagerPolicy != "" && !slices.Contains(policies, c.TopologyManagerPolicy) {
		errs = append(errs, fmt.Errorf("invalid configuration: topologyManagerPolicy (--topology-manager-policy) %q must be one of: %q", c.TopologyManagerPolicy, policies))
	}
	if s := c.TopologyManagerScope; s != "" && s != topologymanager.ScopeContainer && s != topologymanager.ScopePod {
		errs = append(errs, fmt.Errorf("invalid configuration: topologyManagerScope (--topology-manager-scope) %q must be one of: %q, or %q", s, topologymanager.ScopeContainer, topologymanager.ScopePod))
	}
	if _, err := topologymanager.NewPolicyOptions(c.TopologyManagerPolicyOptions); err != nil {
		errs = append(errs, fmt.Errorf("invalid configuration: topologyManagerPolicyOptions (--topology-manager-policy-options): %w", err))
	}
	return errs
}

// validateMemoryManager is upstream's validation of reservedMemory
// (supported types, no zero, no duplicate) and of the policy's name; the
// reservation's sums are checked against the machine when the manager
// starts, as upstream.
func validateMemoryManager(c *kubeletv1beta1.KubeletConfiguration) []error {
	var errs []error
	switch c.MemoryManagerPolicy {
	case "", memorymanager.PolicyNone, memorymanager.PolicyStatic:
	default:
		errs = append(errs, fmt.Errorf("invalid configuration: memoryManagerPolicy (--memory-manager-policy) %q: unknown policy (None or Static)", c.MemoryManagerPolicy))
	}
	seen := map[int32]map[v1.ResourceName]bool{}
	for _, r := range c.ReservedMemory {
		if seen[r.NumaNode] == nil {
			seen[r.NumaNode] = map[v1.ResourceName]bool{}
		}
		for _, name := range slices.Sorted(maps.Keys(r.Limits)) {
			q := r.Limits[name]
			if name != v1.ResourceMemory && !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
				errs = append(errs, fmt.Errorf("invalid configuration: the limit type %q for NUMA node %d is not supported, only %v is accepted", name, r.NumaNode, []v1.ResourceName{v1.ResourceMemory, v1.ResourceHugePagesPrefix + "<HugePageSize>"}))
			}
			if q.IsZero() {
				errs = append(errs, fmt.Errorf("invalid configuration: reserved memory may not be zero for NUMA node %d and resource %q", r.NumaNode, name))
			}
			if seen[r.NumaNode][name] {
				errs = append(errs, fmt.Errorf("invalid configuration: the reserved memory has a duplicate value for NUMA node %d and resource %q", r.NumaNode, name))
			}
			seen[r.NumaNode][name] = true
		}
	}
	return errs
}

func validateCPUManager(c *kubeletv1beta1.KubeletConfiguration) []error {
	var errs []error
	if on, set := c.FeatureGates["CustomCPUCFSQuotaPeriod"]; set && !on && c.CPUCFSQuotaPeriod != nil && c.CPUCFSQuotaPeriod.Duration != 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("invalid configuration: cpuCFSQuotaPeriod (--cpu-cfs-quota-period) %v requires feature gate CustomCPUCFSQuotaPeriod", *c.CPUCFSQuotaPeriod))
	}
	switch c.CPUManagerPolicy {
	case "", cpumanager.PolicyNone, cpumanager.PolicyStatic:
		if _, err := cpumanager.ParseOptions(cmp.Or(c.CPUManagerPolicy, cpumanager.PolicyNone), c.CPUManagerPolicyOptions,
			GateOn(c, "CPUManagerPolicyAlphaOptions"), GateOn(c, "CPUManagerPolicyBetaOptions")); err != nil {
			errs = append(errs, err)
		}
	default:
		errs = append(errs, fmt.Errorf("invalid configuration: cpuManagerPolicy (--cpu-manager-policy) %q: unknown policy (none or static)", c.CPUManagerPolicy))
	}
	if c.CPUManagerReconcilePeriod.Duration < 0 {
		errs = append(errs, fmt.Errorf("invalid configuration: cpuManagerReconcilePeriod (--cpu-manager-reconcile-period) %v must not be negative", c.CPUManagerReconcilePeriod.Duration))
	}
	if c.ReservedSystemCPUs != "" {
		if c.SystemReservedCgroup != "" || c.KubeReservedCgroup != "" {
			errs = append(errs, fmt.Errorf("invalid configuration: can't use reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup (--system-reserved-cgroup) or kubeReservedCgroup (--kube-reserved-cgroup)"))
		}
		if _, err := cpuset.Parse(c.ReservedSystemCPUs); err != nil {
			errs = append(errs, fmt.Errorf("invalid configuration: unable to parse reservedSystemCPUs (--reserved-cpus) %v, error: %w", c.ReservedSystemCPUs, err))
		}
	}
	return errs
}

// GateOn is a feature gate's value: the configuration's, else upstream's
// v1.37.2 default.
func GateOn(c *kubeletv1beta1.KubeletConfiguration, name string) bool {
	if on, ok := c.FeatureGates[name]; ok {
		return on
	}
	return upstreamGates[name].def
}

// LogEffective logs the resolved configuration as upstream does at start
// ("Effective KubeletConfiguration", the v1beta1 YAML /configz serves),
// staticPodURLHeader's values masked.
func LogEffective(ctx context.Context, c *kubeletv1beta1.KubeletConfiguration) {
	logger := klog.FromContext(ctx)
	safe := c.DeepCopy()
	for k := range safe.StaticPodURLHeader {
		safe.StaticPodURLHeader[k] = []string{"<masked>"}
	}
	safe.APIVersion, safe.Kind = kubeletv1beta1.SchemeGroupVersion.String(), "KubeletConfiguration"
	data, err := yaml.Marshal(safe)
	if err != nil {
		logger.Error(err, "Failed to marshal effective KubeletConfiguration for logging")
		return
	}
	logger.Info("Effective KubeletConfiguration", "config", string(data))
}
