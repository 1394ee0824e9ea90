package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"

	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodelet/nodelet/internal/images/pullmanager"
	"github.com/nodelet/nodelet/internal/tracing"
	"github.com/nodelet/nodelet/internal/userns"
)

// Status is what nodelet does with a KubeletConfiguration field.
type Status string

const (
	// Honoured: nodelet does what the field asks.
	Honoured Status = "honoured"
	// Refused: nodelet does not implement the field and refuses to start
	// when it is set to anything but nodelet's default (or a value listed
	// in Accept, which nodelet's behaviour already matches), with a message
	// naming the field and why.
	Refused Status = "refused"
	// Warned: upstream accepts the field and does nothing with it
	// (deprecated, no effect); nodelet accepts it too and logs a warning
	// when it is set.
	Warned Status = "warned"
)

// FieldStatus is what nodelet does with one field of the v1beta1
// KubeletConfiguration, by its JSON path. An entry for a struct covers its
// fields.
type FieldStatus struct {
	// Path is the field's JSON path, e.g. "authentication.x509.clientCAFile".
	Path   string
	Status Status
	// Note says how the field is honoured, or why it is refused or only
	// warned about.
	Note string
	// Test names the tests that prove it; empty when none does.
	Test string
	// RefusedBy names the existing code that refuses a Refused field
	// ("Validate"); empty means checkUnsupported does.
	RefusedBy string
	// Accept are the values (JSON) checkUnsupported accepts for a Refused
	// field besides nodelet's default: values nodelet's behaviour matches.
	Accept []string
	// UpstreamDefault is upstream's default (JSON) of a Refused field
	// whose default nodelet does not deliver: a configuration that spells
	// out upstream's defaults (the node e2e suite writes every one, as does
	// a copy of /configz) must start, so that value is accepted, with a
	// warning naming the field at start, never silently.
	UpstreamDefault string
	// Why is the reason in the refusal or warning message.
	Why string
	// check, when set, replaces checkUnsupported's comparison with the
	// default: the field's own checks (featureGates, or the values
	// upstream validates for a Warned field).
	check func(c *kubeletv1beta1.KubeletConfiguration) []error
}

const (
	whyPullRate  = "image pulls are not rate-limited"
	whyMemoryQoS = "MemoryQoS is not implemented: containers get memory.high=max and no memory.min or memory.low"
)

// fieldStatuses is every field of the v1beta1 KubeletConfiguration but
// apiVersion and kind, in the type's order; docs/configuration.md lists
// the same (TestEveryFieldHasAStatus, TestDocsTableMatches).
var fieldStatuses = []FieldStatus{
	{Path: "enableServer", Status: Honoured,
		Note: "false: no kubelet API on port; the flag --enable-server wins over the file. With a readOnlyPort, refused (nodelet serves that port with the API; upstream serves it alone).",
		Test: "TestEnableServerFromFile"},
	{Path: "staticPodPath", Status: Honoured,
		Note:  "A directory of manifests, rescanned every fileCheckFrequency. Upstream also takes a single manifest file: a path that is a file is refused at start.",
		Test:  "e2e TestManifestChangeAndRemoval; TestUnsupportedFieldsRefused (a file)",
		check: checkStaticPodPath},
	{Path: "podLogsDir", Status: Honoured, Note: "Where the containers' logs are written (/var/log/pods by default).",
		Test: "e2e TestPodRunsWithIPLabelsAndCRILogs"},
	{Path: "syncFrequency", Status: Honoured,
		Note: "Period of the pods' resync, and the longest age (at most 1m) of a cached ConfigMap or Secret. No test sets it and checks its effect."},
	{Path: "fileCheckFrequency", Status: Honoured, Note: "Period of the static pod directory's rescan.",
		Test: "internal/source/file TestSourceFollowsTheDirectory (its Period)"},
	{Path: "httpCheckFrequency", Status: Honoured, Note: "Period of the manifest URL's polling; must be positive with a staticPodURL.",
		Test: "internal/source/manifesturl TestRunPolls; e2e TestClusterStaticPodsFromURL"},
	{Path: "staticPodURL", Status: Honoured,
		Note: "Static pods read from this http(s) URL (upstream's \"http\" source): a Pod, a PodList or several documents, GET at start and every httpCheckFrequency; failed reads keep the last answer's pods, an empty answer removes them. Mirrored like file pods.",
		Test: "internal/source/manifesturl TestPoll; e2e TestClusterStaticPodsFromURL"},
	{Path: "staticPodURLHeader", Status: Honoured, Note: "Headers of every GET of staticPodURL (all values of a name, in order).",
		Test: "internal/source/manifesturl TestPoll; e2e TestClusterStaticPodsFromURL"},
	{Path: "address", Status: Honoured, Note: "Listen address of the kubelet API (and of the read-only port). No test sets it."},
	{Path: "port", Status: Honoured, Note: "Port of the kubelet API, reported in the node's daemonEndpoints.",
		Test: "e2e TestKubeletAPIThroughKubectl (the framework's port)"},
	{Path: "readOnlyPort", Status: Honoured, Note: "The unauthenticated read-only API; 0 (the default) turns it off.",
		Test: "e2e TestKubeletAPIStandaloneReadOnlyPortAndSelfSigned"},
	{Path: "tlsCertFile", Status: Honoured, Note: "Serving certificate; without it a self-signed one is written to --cert-dir.",
		Test: "e2e TestKubeletAPIThroughKubectl (cluster nodes serve the framework's certificate); e2e TestKubeletAPIStandaloneReadOnlyPortAndSelfSigned (self-signed)"},
	{Path: "tlsPrivateKeyFile", Status: Honoured, Note: "The key of tlsCertFile (both or neither).",
		Test: "e2e TestKubeletAPIThroughKubectl"},
	{Path: "tlsCipherSuites", Status: Honoured, Note: "Cipher suites of the kubelet API (Go names, as upstream). No test sets it."},
	{Path: "tlsCurvePreferences", Status: Refused, Why: "the kubelet API's key exchange curves are Go's defaults",
		Note: "Go's default curves are used.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "tlsMinVersion", Status: Honoured, Note: "Minimum TLS version of the kubelet API (TLS 1.2 by default). No test sets it."},
	{Path: "rotateCertificates", Status: Honoured, Note: "Client certificate renewal through CSRs.",
		Test: "e2e TestTLSBootstrapAndRotation; internal/apiclient TestNew"},
	{Path: "serverTLSBootstrap", Status: Honoured, Note: "Serving certificate requested and renewed through CSRs.",
		Test: "e2e TestTLSBootstrapAndRotation"},
	{Path: "authentication.x509.clientCAFile", Status: Honoured, Note: "Client certificates signed by this bundle are authenticated; the file is reloaded when it changes.",
		Test: "internal/server TestAuthenticationAndAuthorization; e2e TestKubeletAPIAuthnAuthz"},
	{Path: "authentication.webhook.enabled", Status: Honoured, Note: "Bearer tokens checked with TokenReview (needs the API server).",
		Test: "internal/server TestAuthenticationAndAuthorization"},
	{Path: "authentication.webhook.cacheTTL", Status: Honoured, Note: "How long a TokenReview answer is cached.",
		Test: "internal/server TestAuthenticationAndAuthorization (answers cached)"},
	{Path: "authentication.anonymous.enabled", Status: Honoured, Note: "Unauthenticated requests as system:anonymous.",
		Test: "internal/server TestAuthenticationAndAuthorization; e2e TestKubeletAPIStandaloneReadOnlyPortAndSelfSigned"},
	{Path: "authorization.mode", Status: Honoured, Note: "AlwaysAllow or Webhook (SubjectAccessReview), as upstream; anything else is refused by Validate.",
		Test: "internal/server TestAuthenticationAndAuthorization; e2e TestKubeletAPIAuthnAuthz"},
	{Path: "authorization.webhook.cacheAuthorizedTTL", Status: Honoured, Note: "How long an allowed SubjectAccessReview is cached.",
		Test: "internal/server TestSubjectAccessReviewCacheTTLs"},
	{Path: "authorization.webhook.cacheUnauthorizedTTL", Status: Honoured, Note: "How long a denied SubjectAccessReview is cached.",
		Test: "internal/server TestSubjectAccessReviewCacheTTLs"},
	{Path: "registryPullQPS", Status: Refused, Why: whyPullRate, Accept: []string{`0`}, UpstreamDefault: `5`,
		Note: "nodelet never rate-limits pulls: 0 (no limit) is what it does; upstream's default of 5 is not applied (set explicitly, it is accepted with a warning).", Test: "TestUnsupportedFieldsRefused"},
	{Path: "registryBurst", Status: Refused, Why: whyPullRate, UpstreamDefault: `10`,
		Note: "Image pulls are not rate-limited; upstream's default 10 set explicitly is accepted with a warning.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "imagePullCredentialsVerificationPolicy", Status: Honoured,
		Note: "KubeletEnsureSecretPulledImages (beta, on): whether a pod may use an image already on the node without presenting the credentials it was pulled with (NeverVerify, NeverVerifyPreloadedImages: the default, NeverVerifyAllowlistedImages, AlwaysVerify); the pull records in <root-dir>/image_manager, upstream's files (internal/images/pullmanager). Upstream's validation: only with the gate on.",
		Test: "internal/images TestEnsureSecretPulledImages; e2e TestClusterEnsureSecretPulledImages", check: checkPullVerification},
	{Path: "preloadedImagesVerificationAllowlist", Status: Honoured,
		Note: "Images (upstream's patterns: a repository, or a prefix ending in /*) that need no verification under NeverVerifyAllowlistedImages; refused with any other policy, as upstream.",
		Test: "internal/images/pullmanager policy tests; TestUnsupportedFieldsRefused (invalid values)"},
	{Path: "eventRecordQPS", Status: Honoured, Note: "Rate limit of the events client. No test sets it."},
	{Path: "eventBurst", Status: Honoured, Note: "Burst of the events client. No test sets it."},
	{Path: "enableDebuggingHandlers", Status: Honoured, Note: "logs, exec, attach, port-forward, run and pprof; off: upstream's 405 answers.",
		Test: "internal/server TestLogsEndpoint"},
	{Path: "enableContentionProfiling", Status: Refused, Why: "block profiling is not implemented",
		Note: "Block profiling is not implemented.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "healthzPort", Status: Honoured, Note: "Port of the plain-HTTP healthz endpoint; 0 turns it off.",
		Test: "e2e TestHealthzReportsUnreachableRuntime (the framework's healthzPort)"},
	{Path: "healthzBindAddress", Status: Honoured, Note: "Address of the healthz endpoint.",
		Test: "e2e TestHealthzReportsUnreachableRuntime (the framework's healthzBindAddress)"},
	{Path: "oomScoreAdj", Status: Honoured, Note: "nodelet's own oom_score_adj, -999 by default as upstream; set at start, a failure logged (lowering it needs CAP_SYS_RESOURCE).",
		Test: "internal/process TestSetOOMScoreAdj"},
	{Path: "clusterDomain", Status: Honoured, Note: "Search domain and FQDN hostnames of the pods.",
		Test: "e2e TestPodSecurityNamesAndDNS"},
	{Path: "clusterDNS", Status: Honoured, Note: "Name servers of ClusterFirst pods.",
		Test: "e2e TestPodSecurityNamesAndDNS"},
	{Path: "streamingConnectionIdleTimeout", Status: Warned, Why: "deprecated upstream, where it no longer has any effect",
		Note: "Deprecated upstream: no longer has any effect there either."},
	{Path: "nodeStatusUpdateFrequency", Status: Honoured, Note: "Period of the node status computation. No test sets it."},
	{Path: "nodeStatusReportFrequency", Status: Honoured,
		Note: "Longest time between two unchanged node status posts. Its default is 5m even when nodeStatusUpdateFrequency is set (upstream then defaults it to nodeStatusUpdateFrequency). No test sets it."},
	{Path: "nodeLeaseDurationSeconds", Status: Honoured, Note: "The Lease's duration; renewed every quarter of it, as upstream.",
		Test: "e2e cluster tests (the framework sets 20, a renewal every 5 s), e.g. TestClusterNodeUnknownThenBackWithoutRestarts"},
	{Path: "imageMinimumGCAge", Status: Honoured, Note: "Minimum age of an unused image before it is collected.",
		Test: "TestGarbageCollectionSettings; e2e TestImageGC"},
	{Path: "imageMaximumGCAge", Status: Honoured, Note: "Unused images older than this are collected (0: never).",
		Test: "internal/imagegc TestGarbageCollectMaxAge; e2e TestImageGC"},
	{Path: "imageGCHighThresholdPercent", Status: Honoured, Note: "Image filesystem use that starts a collection.",
		Test: "TestGarbageCollectionSettings; internal/imagegc TestGarbageCollect"},
	{Path: "imageGCLowThresholdPercent", Status: Honoured, Note: "Image filesystem use a collection brings it down to.",
		Test: "TestGarbageCollectionSettings; internal/imagegc TestGarbageCollect"},
	{Path: "volumeStatsAggPeriod", Status: Honoured, Note: "Period of the volumes' and ephemeral storage's measurement.",
		Test: "e2e TestEvictionLocalStorageLimits, TestCSIDynamicProvisioning"},
	{Path: "kubeletCgroups", Status: Honoured, Note: "nodelet moves itself into this cgroup at start; reported as the summary's kubelet container.",
		Test: "internal/cgroups TestKubeletCgroups"},
	{Path: "systemCgroups", Status: Refused, RefusedBy: "Validate",
		Note: "Refused by Validate: nodelet does not move the node's processes into a system cgroup.",
		Test: "TestBadConfigFiles"},
	{Path: "cgroupRoot", Status: Honoured, Note: "Root of the pods' cgroups.",
		Test: "internal/cgroups TestEnsurePod; e2e TestNodeAllocatableReserved"},
	{Path: "cgroupsPerQOS", Status: Honoured, Note: "The QoS cgroup hierarchy (kubepods, burstable, besteffort).",
		Test: "internal/cgroups TestWithoutCgroupsPerQOS"},
	{Path: "cgroupDriver", Status: Honoured, Note: "cgroupfs or systemd; the driver the runtime reports wins, as upstream.",
		Test: "e2e TestCgroupV1AndRuntimeDriver; internal/kuberuntime TestCgroupDriverFromRuntime"},
	{Path: "cpuManagerPolicy", Status: Honoured, Note: "none or static: Guaranteed containers with integer CPU requests get exclusive CPUs (cpuset), every other container the shared pool; cpu_manager_state as upstream's.",
		Test: "internal/cpumanager TestStaticPolicy; e2e TestClusterCPUManagerStatic"},
	{Path: "singleProcessOOMKill", Status: Refused, Why: "nodelet always sets memory.oom.group=1 on cgroup v2", Accept: []string{`false`},
		Note: "false (upstream's default on cgroup v2) is what nodelet does.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "cpuManagerPolicyOptions", Status: Honoured, Note: "All of upstream's: full-pcpus-only, strict-cpu-reservation, prefer-align-cpus-by-uncorecache, distribute-cpus-across-numa (beta gate), align-by-socket and distribute-cpus-across-cores (alpha gate); upstream's assignment algorithms and its exclusions between options (align-by-socket refuses topologyManagerPolicy single-numa-node or more sockets than NUMA nodes).",
		Test: "internal/cpumanager (upstream's cpu_assignment tables), TestDistributeCPUsAcrossNUMA, TestAlignBySocketHints, TestPreferAlignByUncoreCache, TestPolicyOptionsCompatibility; TestUnsupportedFieldsRefused (validation)"},
	{Path: "cpuManagerReconcilePeriod", Status: Honoured, Note: "How often the shared pool's cpuset is written to the running containers.",
		Test: "internal/cpumanager TestStaticPolicy; e2e TestClusterCPUManagerStatic"},
	{Path: "memoryManagerPolicy", Status: Honoured, Note: "None or Static: a Guaranteed pod's memory and huge pages pinned to the fewest NUMA nodes that hold them (cpuset.mems), memory_manager_state as upstream's.",
		Test: "internal/memorymanager TestAdmitPinsToTheFewestNodes; e2e TestClusterMemoryManagerStatic"},
	{Path: "topologyManagerPolicy", Status: Honoured, Note: "none, best-effort, restricted or single-numa-node: the CPU manager's, device plugins' and memory manager's NUMA hints merged as upstream, TopologyAffinityError when the policy cannot align a pod.",
		Test: "internal/topologymanager (upstream's merge cases); internal/memorymanager TestUnderTopologyPolicies; e2e TestClusterTopologyManager"},
	{Path: "topologyManagerScope", Status: Honoured, Note: "container (a hint per container) or pod (one for the pod).",
		Test: "internal/topologymanager TestScopes; e2e TestClusterTopologyManager"},
	{Path: "topologyManagerPolicyOptions", Status: Honoured, Note: "prefer-closest-numa-nodes (the NUMA distances of sysfs) and max-allowable-numa-nodes, upstream's validation.",
		Test: "internal/topologymanager TestPolicyBestEffortMergeClosestNUMA, TestNew; TestTopologyManagerValidation"},
	{Path: "qosReserved", Status: Refused, Why: "QoS-level memory reservation, alpha upstream, is not implemented",
		Note: "Alpha upstream, not implemented.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "runtimeRequestTimeout", Status: Honoured, Note: "Timeout of runtime calls but pull, logs, exec and attach. No test sets it."},
	{Path: "hairpinMode", Status: Warned, Why: "upstream validates it and does nothing else with it; the CNI plugin sets hairpin mode",
		Note: "Upstream validates it (promiscuous-bridge, hairpin-veth, none), as nodelet does, and does nothing else with it.",
		Test: "TestUnsupportedFieldsRefused (an invalid value)", check: checkHairpinMode},
	{Path: "maxPods", Status: Honoured, Note: "The node's pods capacity and allocatable.",
		Test: "internal/nodestatus TestCapacityAndAllocatable; e2e TestClusterNodeRegistersWithStatusAndLease"},
	{Path: "podCIDR", Status: Honoured,
		Note: "Given to the runtime at start through CRI UpdateRuntimeConfig, as upstream; in cluster mode the Node's spec.podCIDRs, once allocated, replace it.",
		Test: "internal/nodestatus TestPodCIDRToRuntime"},
	{Path: "podPidsLimit", Status: Honoured, Note: "pids.max of each pod's cgroup.",
		Test: "internal/cgroups TestEnsurePod"},
	{Path: "resolvConf", Status: Honoured, Note: "The resolver file pods' DNS starts from (\"\" turns host lookups off). No test checks a pod's resolver against it."},
	{Path: "runOnce", Status: Refused, Why: "run-once mode is not implemented; upstream refuses it too",
		Note: "Upstream refuses it as well (deprecated).", Test: "TestUnsupportedFieldsRefused"},
	{Path: "cpuCFSQuota", Status: Honoured, Note: "CFS quota of containers with a CPU limit.",
		Test: "internal/cgroups TestContainerResources"},
	{Path: "cpuCFSQuotaPeriod", Status: Honoured, Note: "The CFS period of containers and pods.",
		Test: "internal/cgroups TestContainerResources, TestResourceOptions"},
	{Path: "nodeStatusMaxImages", Status: Honoured,
		Note:  "Images listed in the node status, largest first (50 by default; 0: none; -1: no cap), at most 5 names each, as upstream; below -1 refused with upstream's message.",
		Test:  "internal/nodestatus TestNodeImages",
		check: checkNodeStatusMaxImages},
	{Path: "maxOpenFiles", Status: Honoured, Note: "nodelet's own open files limit (RLIMIT_NOFILE), 1000000 by default as upstream; set at start, a failure logged.",
		Test: "e2e TestProcessSettings"},
	{Path: "contentType", Status: Honoured, Note: "Content type of the API requests (protobuf by default).",
		Test: "internal/apiclient TestClients (the default only)"},
	{Path: "kubeAPIQPS", Status: Honoured, Note: "Rate limit of the API client. No test sets it."},
	{Path: "kubeAPIBurst", Status: Honoured, Note: "Burst of the API client. No test sets it."},
	{Path: "serializeImagePulls", Status: Honoured, Note: "One pull at a time; defaults from maxParallelImagePulls, as upstream.",
		Test: "TestImagePullSettings; internal/images TestParallelPulls; e2e TestParallelImagePulls"},
	{Path: "maxParallelImagePulls", Status: Honoured, Note: "Limit of parallel pulls.",
		Test: "TestImagePullSettings; internal/images TestParallelPulls; e2e TestParallelImagePulls"},
	{Path: "evictionHard", Status: Honoured, Note: "Hard eviction thresholds, upstream's defaults when unset.",
		Test: "TestEvictionSettings; e2e TestEvictionDiskPressure, TestEvictionMemory, TestEvictionInodes, TestEvictionPIDs"},
	{Path: "evictionSoft", Status: Honoured, Note: "Soft eviction thresholds.",
		Test: "TestEvictionSettings; e2e TestEvictionSoftDisk"},
	{Path: "evictionSoftGracePeriod", Status: Honoured, Note: "Grace periods of the soft thresholds.",
		Test: "TestEvictionSettings; e2e TestEvictionSoftDisk"},
	{Path: "evictionPressureTransitionPeriod", Status: Honoured, Note: "How long a pressure condition outlasts its signal.",
		Test: "TestEvictionSettings; e2e TestEvictionDiskPressure"},
	{Path: "evictionMaxPodGracePeriod", Status: Honoured, Note: "Cap of the grace period of pods evicted for a soft threshold.",
		Test: "e2e TestEvictionSoftDisk"},
	{Path: "evictionMinimumReclaim", Status: Honoured, Note: "What an eviction reclaims beyond the threshold.",
		Test: "TestEvictionSettings; internal/eviction TestThresholdMet"},
	{Path: "mergeDefaultEvictionSettings", Status: Honoured, Note: "Keeps evictionHard's defaults for the signals it does not name.",
		Test: "TestEvictionSettings"},
	{Path: "podsPerCore", Status: Refused, Why: "a pods-per-core limit is not implemented",
		Note: "maxPods is the only pod limit.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "enableControllerAttachDetach", Status: Refused, Accept: []string{`true`},
		Why:  "nodelet always leaves attach and detach to the attach/detach controller",
		Note: "The node is always annotated controller-managed-attach-detach; false is refused.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "protectKernelDefaults", Status: Refused, Why: "nodelet neither checks nor sets the kernel tunables",
		Note: "Unset, upstream sets vm.overcommit_memory, vm.panic_on_oom, kernel.panic and kernel.panic_on_oops; nodelet leaves them as they are.",
		Test: "TestUnsupportedFieldsRefused"},
	{Path: "makeIPTablesUtilChains", Status: Refused, Why: "nodelet does not create the KUBE-IPTABLES-HINT and KUBE-FIREWALL chains", Accept: []string{`false`}, UpstreamDefault: `true`,
		Note: "false (no chains) is what nodelet does; true is refused. Unset, upstream creates the chains and nodelet does not.",
		Test: "TestUnsupportedFieldsRefused"},
	{Path: "iptablesMasqueradeBit", Status: Warned, Why: "deprecated upstream, where it no longer has any effect",
		Note: "Deprecated upstream: no longer has any effect there either; 0 to 31, as upstream validates.",
		Test: "TestUnsupportedFieldsRefused (out of range)", check: checkIPTablesBits},
	{Path: "iptablesDropBit", Status: Warned, Why: "deprecated upstream, where it no longer has any effect",
		Note: "Deprecated upstream: no longer has any effect there either; 0 to 31, as upstream validates.",
		Test: "TestUnsupportedFieldsRefused (out of range)"},
	{Path: "featureGates", Status: Refused,
		Note: "Honoured: KubeletCrashLoopBackOffMax, EventedPLEG (false: relist only), GracefulNodeShutdown and GracefulNodeShutdownBasedOnPodPriority (false: upstream's validation of the shutdown settings), ComponentFlagz and ComponentStatusz (false: no /flagz, /statusz), ContainerStopSignals (true: lifecycle.stopSignal to the runtime and in the status; false: a container with one is refused), KubeletEnsureSecretPulledImages (false: no pull records, any pod uses any image on the node, and the verification settings are refused, as upstream), PodCertificateRequest (false: a podCertificate source fails the mount, naming the gate), CPUManagerPolicyAlphaOptions and CPUManagerPolicyBetaOptions (the options that need them refused without them, as upstream), CustomCPUCFSQuotaPeriod (false: cpuCFSQuotaPeriod must be 100ms, as upstream), PodLevelResources (false: a pod with spec.resources is refused at admission, naming the gate; PodLevelResourcesFixDefaulting and PodLevelResourcesFixKubeletQOSClass then accepted at any value), DRAOptionalNodeOperations and DRAWorkloadResourceClaims (the DRA manager, as upstream), ResourceHealthStatus (device plugin devices' health in the containers' allocatedResourcesStatus; DRA devices' health not yet reported). Accepted: any v1.37.2 gate at its default, MemoryQoS false, InPlacePodLevelResourcesVerticalScaling false and RestartAllContainersOnContainerExits true (what nodelet does). Refused: any other value, and unknown gates.",
		Test: "TestUnsupportedFieldsRefused; TestCrashLoopBackOffMax; e2e TestEventedPLEG", check: checkFeatureGates},
	{Path: "failSwapOn", Status: Honoured, Note: "Refuses to start with swap on.",
		Test: "internal/nodelet TestCheckSwap; TestSwapAndCgroupV1Settings"},
	{Path: "memorySwap.swapBehavior", Status: Honoured, Note: "NoSwap or LimitedSwap for the containers.",
		Test: "internal/cgroups TestResourceOptions; TestValidateSwapBehavior"},
	{Path: "containerLogMaxSize", Status: Honoured, Note: "Size at which a container log is rotated.",
		Test: "e2e TestContainerLogRotation"},
	{Path: "containerLogMaxFiles", Status: Honoured, Note: "Log files kept per container.",
		Test: "e2e TestContainerLogRotation; internal/logs TestNewConfig"},
	{Path: "containerLogMaxWorkers", Status: Honoured, Note: "Parallel log rotations.",
		Test: "internal/logs TestNewConfig, TestRotateOnceWorkers"},
	{Path: "containerLogMonitorInterval", Status: Honoured, Note: "Period of the log size check.",
		Test: "e2e TestContainerLogRotation; internal/logs TestNewConfig"},
	{Path: "configMapAndSecretChangeDetectionStrategy", Status: Refused, Accept: []string{`"Cache"`}, UpstreamDefault: `"Watch"`,
		Why:  "nodelet reads ConfigMaps and Secrets through a TTL cache, the Cache strategy; Watch and Get are not implemented",
		Note: "nodelet behaves as Cache (accepted); upstream's default is Watch.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "systemReserved", Status: Honoured, Note: "Subtracted from allocatable; enforced on systemReservedCgroup when asked.",
		Test: "internal/cgroups TestEnforceReserved; internal/nodestatus TestCapacityAndAllocatable; e2e TestNodeAllocatableReserved"},
	{Path: "kubeReserved", Status: Honoured, Note: "Subtracted from allocatable; enforced on kubeReservedCgroup when asked.",
		Test: "internal/cgroups TestEnforceReserved; internal/nodestatus TestCapacityAndAllocatable; e2e TestNodeAllocatableReserved"},
	{Path: "reservedSystemCPUs", Status: Honoured, Note: "The CPUs kept out of exclusive allocation; their count replaces kubeReserved.cpu + systemReserved.cpu in allocatable, as upstream.",
		Test: "internal/cpumanager TestStrictReservationAndNone; TestUnsupportedFieldsRefused (validation)"},
	{Path: "showHiddenMetricsForVersion", Status: Refused, Why: "nodelet has no hidden metrics to show",
		Note: "nodelet's metrics have no deprecated hidden ones.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "systemReservedCgroup", Status: Honoured, Note: "Cgroup limited to systemReserved (enforceNodeAllocatable system-reserved).",
		Test: "internal/cgroups TestEnforceReserved; e2e TestNodeAllocatableReserved"},
	{Path: "kubeReservedCgroup", Status: Honoured, Note: "Cgroup limited to kubeReserved (enforceNodeAllocatable kube-reserved).",
		Test: "internal/cgroups TestEnforceReserved; e2e TestNodeAllocatableReserved"},
	{Path: "enforceNodeAllocatable", Status: Honoured, Note: "pods, system-reserved[-compressible], kube-reserved[-compressible] or none.",
		Test: "internal/cgroups TestEnforceReserved; TestNodeAllocatableSettings; e2e TestNodeAllocatableReserved"},
	{Path: "allowedUnsafeSysctls", Status: Honoured, Note: "Unsafe sysctls pods may set.",
		Test: "internal/admission TestSysctls"},
	{Path: "defaultPodSysctls", Status: Refused, Why: "default pod sysctls, alpha upstream, are not implemented",
		Note: "Alpha upstream, not implemented.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "volumePluginDir", Status: Refused, Why: "FlexVolume plugins are not implemented, CSI drivers are", UpstreamDefault: `"/usr/libexec/kubernetes/kubelet-plugins/volume/exec/"`,
		Note: "No FlexVolume: CSI drivers only.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "providerID", Status: Honoured, Note: "The Node's spec.providerID. No test sets it."},
	{Path: "kernelMemcgNotification", Status: Honoured,
		Note: "nodelet always arms memory threshold notifiers (docs/pressure.md): true is what it does; false (the default) does not turn them off, a faster reaction than upstream's polling. No test sets the field."},
	{Path: "logging.format", Status: Refused, Accept: []string{`"text"`},
		Why:  "nodelet logs with klog's text format only",
		Note: "klog's text format only.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "logging.flushFrequency", Status: Refused, Accept: []string{`5000000000`, `"5s"`},
		Why:  "nodelet flushes its log every 5s, klog's default",
		Note: "klog's 5 s; upstream's default 5s is accepted.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "logging.verbosity", Status: Honoured, Note: "klog's verbosity, unless -v is given (flags win, as upstream).",
		Test: "TestLoggingSettings"},
	{Path: "logging.vmodule", Status: Honoured, Note: "klog's per-file verbosity, unless --vmodule is given.",
		Test: "TestLoggingSettings"},
	{Path: "logging.options", Status: Refused, Why: "split log streams and their buffers are not implemented",
		Note: "Alpha upstream, not implemented; kubeadm's zero values are accepted.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "enableSystemLogHandler", Status: Honoured, Note: "The /logs/ endpoint.",
		Test: "internal/server TestLogsEndpoint"},
	{Path: "enableSystemLogQuery", Status: Honoured, Note: "Node log queries on /logs/.",
		Test: "internal/server TestLogsEndpoint"},
	{Path: "shutdownGracePeriod", Status: Honoured, Note: "Graceful node shutdown through logind's inhibitor lock.",
		Test: "TestShutdownSettings; e2e TestGracefulNodeShutdown"},
	{Path: "shutdownGracePeriodCriticalPods", Status: Honoured, Note: "The critical pods' share of shutdownGracePeriod.",
		Test: "TestShutdownSettings; e2e TestGracefulNodeShutdown"},
	{Path: "shutdownGracePeriodByPodPriority", Status: Honoured, Note: "Shutdown grace periods by pod priority.",
		Test: "internal/shutdown TestPeriods; e2e TestGracefulNodeShutdownByPodPriority"},
	{Path: "crashLoopBackOff.maxContainerRestartPeriod", Status: Honoured, Note: "Longest container restart back-off (gate KubeletCrashLoopBackOffMax).",
		Test: "TestCrashLoopBackOffMax; e2e TestCrashLoopBackOffMax"},
	{Path: "reservedMemory", Status: Honoured, Note: "The memory manager's reservation per NUMA node and type; per type it must add up to kubeReserved + systemReserved + the hard eviction threshold (upstream's check, at start).",
		Test: "internal/memorymanager TestReservation; TestMemoryManagerValidation; e2e TestClusterMemoryManagerStatic"},
	{Path: "enableProfilingHandler", Status: Refused, Accept: []string{`true`},
		Why:  "nodelet serves /debug/pprof/ whenever enableDebuggingHandlers is on",
		Note: "pprof follows enableDebuggingHandlers; false is refused.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "enableDebugFlagsHandler", Status: Refused, Accept: []string{`false`}, UpstreamDefault: `true`,
		Why:  "nodelet has no /debug/flags/v endpoint",
		Note: "false (no endpoint) is what nodelet does; true is refused. Unset, upstream serves it and nodelet does not.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "seccompDefault", Status: Honoured, Note: "RuntimeDefault seccomp profile for containers without one.",
		Test: "internal/kuberuntime TestSeccompProfile; e2e TestSeccompDefault"},
	{Path: "memoryThrottlingFactor", Status: Refused, Why: whyMemoryQoS,
		Note: "MemoryQoS (beta upstream) is not implemented.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "memoryReservationPolicy", Status: Refused, Why: whyMemoryQoS, Accept: []string{`"None"`},
		Note: "None (upstream's default) is what nodelet does.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "registerWithTaints", Status: Honoured, Note: "Taints of the Node nodelet creates. No test sets it."},
	{Path: "registerNode", Status: Honoured, Note: "false: nodelet reports the status of a Node someone else created. No test sets it."},
	{Path: "tracing", Status: Honoured,
		Note: "OpenTelemetry traces (KubeletTracing, GA) through component-base's OTLP gRPC exporter to endpoint (default localhost:4317), samplingRatePerMillion of the traces nodelet starts: the CRI calls, syncPod, syncTerminatingPod, syncTerminatedPod, Images/ and Containers/GarbageCollect, as upstream's (internal/tracing). Upstream's validation. Not traced, unlike upstream: the API client's requests and the kubelet API's.",
		Test: "e2e TestTracing; TestUnsupportedFieldsRefused (invalid values)", check: checkTracing},
	{Path: "localStorageCapacityIsolation", Status: Refused, Accept: []string{`true`},
		Why:  "local ephemeral storage isolation cannot be turned off in nodelet",
		Note: "Ephemeral storage is always reported and enforced; false is refused.", Test: "TestUnsupportedFieldsRefused"},
	{Path: "containerRuntimeEndpoint", Status: Honoured, Note: "The CRI runtime's socket.",
		Test: "every e2e test (the framework's endpoint); e2e TestHealthzReportsUnreachableRuntime"},
	{Path: "imageServiceEndpoint", Status: Honoured, Note: "The CRI image service's socket (the runtime's by default). No test uses a separate one.",
		Test: "TestFlagsOverrideFile (the default only)"},
	{Path: "failCgroupV1", Status: Honoured, Note: "Refuses to start on cgroup v1.",
		Test: "internal/nodelet TestCheckCgroupV1; e2e TestCgroupV1AndRuntimeDriver"},
	{Path: "userNamespaces", Status: Honoured,
		Note: "idsPerPod: the IDs of each hostUsers: false pod's user namespace (65536 by default; a multiple of 65536), allocated from the kubelet user's subordinate IDs (getsubids kubelet) or upstream's default range, recorded in the pod's directory (internal/userns).",
		Test: "internal/userns tests; e2e TestUserNamespaces; TestUnsupportedFieldsRefused (invalid values)", check: checkUserNamespaces},
}

// nodeletGates are the feature gates nodelet acts on, both ways.
var nodeletGates = map[string]bool{
	// The CPU manager's options: alpha and beta ones need their gate, as
	// upstream (cpumanager.ParseOptions).
	"CPUManagerPolicyAlphaOptions": true,
	"CPUManagerPolicyBetaOptions":  true,
	// Off: cpuCFSQuotaPeriod must be 100ms (Validate, upstream's message).
	"CustomCPUCFSQuotaPeriod": true,
	// Off: a pod with pod-level resources (spec.resources) is refused at
	// admission naming the gate (admission.PodLevelResourcesGate).
	"PodLevelResources":          true,
	"KubeletCrashLoopBackOffMax": true, // SetDefaults, Validate, CrashLoopBackOffMax
	"EventedPLEG":                true, // false: relist only (pleg.RuntimeWatchers)
	// Off: no shutdown grace periods, or none by pod priority (Validate,
	// as upstream's validation); the shutdown manager needs no more.
	"GracefulNodeShutdown":                   true,
	"GracefulNodeShutdownBasedOnPodPriority": true,
	// Off: no /flagz, no /statusz (server.Config).
	"ComponentFlagz":   true,
	"ComponentStatusz": true,
	// On: lifecycle.stopSignal to the runtime, stopSignal in the status;
	// off: a container with one is refused (kuberuntime.Config).
	"ContainerStopSignals": true,
	// On: image pull records and credential verification (images.Config.Pulls).
	"KubeletEnsureSecretPulledImages": true,
	// Off: no pod certificate manager; a podCertificate source fails the
	// mount, naming the gate (volumes.ManagerConfig.PodCertificates).
	"PodCertificateRequest": true,
	// On: an allocation whose results skip node operations is prepared as
	// upstream; off, refused (dra.Config.OptionalNodeOperations).
	"DRAOptionalNodeOperations": true,
	// On: claims of the pod's PodGroup count as its own
	// (dra.Config.PodGroupClaims).
	"DRAWorkloadResourceClaims": true,
	// On: the containers' allocatedResourcesStatus gives their device
	// plugin devices' health; off: not reported (podsync.Config).
	"ResourceHealthStatus": true,
}

// gatesNodeletMatches are gates nodelet does not implement, with the value
// its behaviour matches (accepted; the other value is refused).
var gatesNodeletMatches = map[string]struct {
	value bool
	why   string
}{
	"MemoryQoS": {false, whyMemoryQoS},
	// Off, upstream refuses resizes of pod-level resources (Infeasible), as
	// nodelet always does.
	"InPlacePodLevelResourcesVerticalScaling": {false, "nodelet does not resize pod-level resources in place (such a resize is Infeasible)"},
	// Honoured on (kuberuntime's RestartAll); off, upstream falls back to
	// the container's restart policy, which nodelet does not do.
	"RestartAllContainersOnContainerExits": {true, "a RestartAllContainers rule always restarts the pod's containers in nodelet"},
}

// podLevelFixes are gates that change only how pod-level resources are
// read: any value is accepted while PodLevelResources is off.
var podLevelFixes = map[string]bool{"PodLevelResourcesFixDefaulting": true, "PodLevelResourcesFixKubeletQOSClass": true}

// checkFeatureGates refuses the gates nodelet does not act on when they
// are set away from the v1.37.2 default (or away from what nodelet does),
// locked gates set otherwise and unknown gates, as upstream refuses those.
func checkFeatureGates(c *kubeletv1beta1.KubeletConfiguration) []error {
	names := make([]string, 0, len(c.FeatureGates))
	for name := range c.FeatureGates {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		on := c.FeatureGates[name]
		if nodeletGates[name] {
			continue
		}
		if m, ok := gatesNodeletMatches[name]; ok {
			if on != m.value {
				errs = append(errs, fmt.Errorf("featureGates: %s=%v is not supported by nodelet (%s); remove it or set it to %v", name, on, m.why, m.value))
			}
			continue
		}
		spec, known := upstreamGates[name]
		switch {
		case podLevelFixes[name] && !GateOn(c, "PodLevelResources"):
			// Only pods with pod-level resources see them, and those are
			// refused while PodLevelResources is off.
		case !known:
			errs = append(errs, fmt.Errorf("featureGates: unrecognized feature gate: %s", name))
		case on == spec.def:
		case spec.locked:
			errs = append(errs, fmt.Errorf("featureGates: cannot set feature gate %s to %v, feature is locked to %v", name, on, spec.def))
		default:
			errs = append(errs, fmt.Errorf("featureGates: %s=%v is not supported by nodelet (it does not act on this gate); remove it", name, on))
		}
	}
	return errs
}

// checkStaticPodPath refuses a staticPodPath that is a file: nodelet reads
// a directory of manifests only. A path that does not exist yet is fine
// (its pods come when it does).
func checkStaticPodPath(c *kubeletv1beta1.KubeletConfiguration) []error {
	if c.StaticPodPath == "" {
		return nil
	}
	if fi, err := os.Stat(c.StaticPodPath); err == nil && !fi.IsDir() {
		return []error{fmt.Errorf("staticPodPath %q is a file, not supported by nodelet (it reads a directory of manifests); put the manifest in a directory and name that", c.StaticPodPath)}
	}
	return nil
}

// checkNodeStatusMaxImages validates nodeStatusMaxImages as upstream does.
func checkNodeStatusMaxImages(c *kubeletv1beta1.KubeletConfiguration) []error {
	if p := c.NodeStatusMaxImages; p != nil && *p < -1 {
		return []error{fmt.Errorf("invalid configuration: nodeStatusMaxImages (--node-status-max-images) %v must be -1 or greater", *p)}
	}
	return nil
}

// checkHairpinMode validates hairpinMode as upstream does, with its message.
func checkHairpinMode(c *kubeletv1beta1.KubeletConfiguration) []error {
	switch c.HairpinMode {
	case "", kubeletv1beta1.HairpinNone, kubeletv1beta1.HairpinVeth, kubeletv1beta1.PromiscuousBridge:
		return nil
	}
	return []error{fmt.Errorf("invalid configuration: option %q specified for hairpinMode (--hairpin-mode). Valid options are %q, %q or %q",
		c.HairpinMode, kubeletv1beta1.HairpinNone, kubeletv1beta1.HairpinVeth, kubeletv1beta1.PromiscuousBridge)}
}

// checkIPTablesBits validates iptablesMasqueradeBit and iptablesDropBit as
// upstream does, with its messages.
func checkIPTablesBits(c *kubeletv1beta1.KubeletConfiguration) []error {
	var errs []error
	if b := c.IPTablesDropBit; b != nil && (*b < 0 || *b > 31) {
		errs = append(errs, fmt.Errorf("invalid configuration: iptablesDropBit (--iptables-drop-bit) %v must be between 0 and 31, inclusive", *b))
	}
	if b := c.IPTablesMasqueradeBit; b != nil && (*b < 0 || *b > 31) {
		errs = append(errs, fmt.Errorf("invalid configuration: iptablesMasqueradeBit (--iptables-masquerade-bit) %v must be between 0 and 31, inclusive", *b))
	}
	return errs
}

func checkUserNamespaces(c *kubeletv1beta1.KubeletConfiguration) []error {
	if c.UserNamespaces == nil {
		return nil
	}
	if err := userns.ValidateIDsPerPod(c.UserNamespaces.IDsPerPod); err != nil {
		return []error{err}
	}
	return nil
}

// checkPullVerification is upstream's validation of the image pull
// credential verification settings, with its messages.
func checkPullVerification(c *kubeletv1beta1.KubeletConfiguration) []error {
	if !EnsureSecretPulledImages(c) {
		var errs []error
		if c.ImagePullCredentialsVerificationPolicy != "" {
			errs = append(errs, errors.New("invalid configuration: `imagePullCredentialsVerificationPolicy` must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled"))
		}
		if len(c.PreloadedImagesVerificationAllowlist) > 0 {
			errs = append(errs, errors.New("invalid configuration: `preloadedImagesVerificationAllowlist` must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled"))
		}
		return errs
	}
	return pullmanager.Validate(c.ImagePullCredentialsVerificationPolicy, c.PreloadedImagesVerificationAllowlist)
}

// checkTracing is upstream's validation of the tracing configuration.
func checkTracing(c *kubeletv1beta1.KubeletConfiguration) []error {
	if err := tracing.Validate(c.Tracing); err != nil {
		return []error{err}
	}
	return nil
}

// GateEnabled reports whether the feature gate name is on: as set, else
// its v1.37.2 default.
func GateEnabled(c *kubeletv1beta1.KubeletConfiguration, name string) bool {
	if on, set := c.FeatureGates[name]; set {
		return on
	}
	return upstreamGates[name].def
}

// EnsureSecretPulledImages reports whether the KubeletEnsureSecretPulledImages
// gate (beta, on by default) is on.
func EnsureSecretPulledImages(c *kubeletv1beta1.KubeletConfiguration) bool {
	on, set := c.FeatureGates["KubeletEnsureSecretPulledImages"]
	return on || !set
}

// nodeletDefaults is a KubeletConfiguration with nothing set but
// nodelet's defaults.
var nodeletDefaults = sync.OnceValue(func() *kubeletv1beta1.KubeletConfiguration {
	c := &kubeletv1beta1.KubeletConfiguration{}
	SetDefaults(c)
	return c
})

// checkUnsupported refuses the Refused fields set to anything but nodelet's
// default or a value it accepts, runs the fields' own checks, and logs a
// warning for each Warned field that is set (Validate runs once, at start).
func checkUnsupported(c *kubeletv1beta1.KubeletConfiguration) []error {
	def := nodeletDefaults()
	var errs []error
	for _, f := range fieldStatuses {
		if f.check != nil {
			errs = append(errs, f.check(c)...)
		}
		if f.Status != Refused || f.RefusedBy != "" || f.check != nil {
			continue
		}
		got := fieldJSON(c, f.Path)
		if sameJSON(got, fieldJSON(def, f.Path)) || acceptedJSON(got, f.Accept) {
			continue
		}
		if f.UpstreamDefault != "" && sameJSON(got, f.UpstreamDefault) {
			klog.Background().Info("Warning: a configuration field is set to upstream's default, which nodelet does not apply", "field", f.Path, "value", got, "why", f.Why)
			continue
		}
		msg := fmt.Sprintf("%s %s is not supported by nodelet (%s); remove it", f.Path, got, f.Why)
		if len(f.Accept) > 0 {
			msg += " or set it to " + strings.Join(f.Accept, " or ")
		}
		errs = append(errs, fmt.Errorf("%s", msg))
	}
	for _, w := range warnings(c) {
		klog.Background().Info("Warning: a configuration field that has no effect is set", "problem", w)
	}
	return errs
}

// warnings are the messages of the Warned fields set to anything but
// nodelet's default.
func warnings(c *kubeletv1beta1.KubeletConfiguration) []string {
	def := nodeletDefaults()
	var out []string
	for _, f := range fieldStatuses {
		if f.Status != Warned {
			continue
		}
		if got := fieldJSON(c, f.Path); !sameJSON(got, fieldJSON(def, f.Path)) {
			out = append(out, fmt.Sprintf("%s %s has no effect: %s", f.Path, got, f.Why))
		}
	}
	return out
}

// fieldJSON is the JSON of the field at path in c; "null" when it is unset
// (a nil pointer, an empty map or list, a pointer to an empty struct).
func fieldJSON(c *kubeletv1beta1.KubeletConfiguration, path string) string {
	v, ok := fieldByPath(reflect.ValueOf(c).Elem(), path)
	if !ok {
		panic(fmt.Sprintf("config: no field %q in KubeletConfiguration", path))
	}
	if !v.IsValid() {
		return "null"
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || (v.Elem().Kind() == reflect.Struct && v.Elem().IsZero()) {
			return "null"
		}
	case reflect.Map, reflect.Slice:
		if v.Len() == 0 {
			return "null"
		}
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return fmt.Sprintf("%v", v.Interface())
	}
	return string(b)
}

// fieldByPath is the field at a JSON path under v (a struct), following
// pointers; the zero Value when a pointer on the way is nil. ok is false
// when there is no such field.
func fieldByPath(v reflect.Value, path string) (field reflect.Value, ok bool) {
	for _, name := range strings.Split(path, ".") {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, true
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			return reflect.Value{}, false
		}
		if v, ok = fieldByJSONName(v, name); !ok {
			return reflect.Value{}, false
		}
	}
	return v, true
}

// fieldByJSONName is v's field named name in JSON, inlined (embedded
// untagged) structs included.
func fieldByJSONName(v reflect.Value, name string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !sf.IsExported() || tag == "-" {
			continue
		}
		if sf.Anonymous && tag == "" {
			if inner := reflect.Indirect(v.Field(i)); inner.Kind() == reflect.Struct {
				if f, ok := fieldByJSONName(inner, name); ok {
					return f, true
				}
			}
			continue
		}
		if tag == "" {
			tag = sf.Name
		}
		if tag == name {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// sameJSON reports whether two JSON documents hold the same value.
func sameJSON(a, b string) bool {
	if a == b {
		return true
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func acceptedJSON(got string, accept []string) bool {
	for _, a := range accept {
		if sameJSON(got, a) {
			return true
		}
	}
	return false
}
