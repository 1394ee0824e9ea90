package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func TestFlagsOverrideFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /from/file
syncFrequency: 30s
fileCheckFrequency: 7s
maxPods: 50
podLogsDir: /file/logs
healthzPort: 12345
containerRuntimeEndpoint: unix:///file.sock
`), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := Parse(context.Background(), []string{"--config", path, "--pod-manifest-path", "/from/flag", "--max-pods", "7", "--hostname-override", "MyNode"})
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	checks := []struct {
		what      string
		got, want any
	}{
		{"staticPodPath (flag wins)", c.StaticPodPath, "/from/flag"},
		{"maxPods (flag wins)", c.MaxPods, int32(7)},
		{"syncFrequency (file)", c.SyncFrequency.Duration, 30 * time.Second},
		{"fileCheckFrequency (file)", c.FileCheckFrequency.Duration, 7 * time.Second},
		{"podLogsDir (file)", c.PodLogsDir, "/file/logs"},
		{"healthzPort (file)", *c.HealthzPort, int32(12345)},
		{"healthzBindAddress (default)", c.HealthzBindAddress, "127.0.0.1"},
		{"runtime endpoint (file)", c.ContainerRuntimeEndpoint, "unix:///file.sock"},
		{"image endpoint (defaults to runtime)", c.ImageServiceEndpoint, "unix:///file.sock"},
		{"node name (lower-cased)", o.NodeName, "mynode"},
		{"root dir (default)", o.RootDir, "/var/lib/kubelet"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.what, ch.got, ch.want)
		}
	}
}

func TestDefaultsWithoutFile(t *testing.T) {
	o, err := Parse(context.Background(), []string{"--hostname-override", "n"})
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if c.SyncFrequency.Duration != time.Minute || c.FileCheckFrequency.Duration != 20*time.Second || c.MaxPods != 110 ||
		*c.HealthzPort != 10248 || c.PodLogsDir != "/var/log/pods" || c.ContainerRuntimeEndpoint != DefaultContainerRuntimeEndpoint {
		t.Errorf("defaults: %+v", c)
	}
}

// failSwapOn and failCgroupV1 default to true, as upstream; their flags
// and the file set them false; a valid swap behaviour is kept.
func TestSwapAndCgroupV1Settings(t *testing.T) {
	o, err := Parse(context.Background(), nil)
	if err != nil || !*o.Config.FailSwapOn || !*o.Config.FailCgroupV1 {
		t.Fatalf("defaults: %v, failSwapOn %v, failCgroupV1 %v", err, o.Config.FailSwapOn, o.Config.FailCgroupV1)
	}
	o, err = Parse(context.Background(), []string{"--fail-swap-on=false", "--fail-cgroupv1=false"})
	if err != nil || *o.Config.FailSwapOn || *o.Config.FailCgroupV1 {
		t.Fatalf("flags false: %v, failSwapOn %v, failCgroupV1 %v", err, *o.Config.FailSwapOn, *o.Config.FailCgroupV1)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	_ = os.WriteFile(path, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfailSwapOn: false\nmemorySwap: {swapBehavior: LimitedSwap}\n"), 0o644)
	o, err = Parse(context.Background(), []string{"--config", path})
	if err != nil || *o.Config.FailSwapOn || o.Config.MemorySwap.SwapBehavior != "LimitedSwap" {
		t.Fatalf("file: %v, failSwapOn %v, swapBehavior %q", err, *o.Config.FailSwapOn, o.Config.MemorySwap.SwapBehavior)
	}
}

// memorySwap.swapBehavior as upstream's validation (NodeSwap is GA): "",
// NoSwap or LimitedSwap, exactly; anything else with upstream's message.
func TestValidateSwapBehavior(t *testing.T) {
	for _, tt := range []struct {
		behavior string
		wantErr  string
	}{
		{behavior: ""},
		{behavior: "NoSwap"},
		{behavior: "LimitedSwap"},
		{behavior: "UnlimitedSwap", wantErr: `invalid configuration: memorySwap.swapBehavior "UnlimitedSwap" must be one of: "", "LimitedSwap" or "NoSwap"`},
		{behavior: "noswap", wantErr: `invalid configuration: memorySwap.swapBehavior "noswap" must be one of: "", "LimitedSwap" or "NoSwap"`},
	} {
		t.Run(tt.behavior, func(t *testing.T) {
			c := &kubeletv1beta1.KubeletConfiguration{}
			SetDefaults(c)
			c.MemorySwap.SwapBehavior = tt.behavior
			err := Validate(c)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Validate = %v", err)
			}
			if tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("Validate = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestBadConfigFiles(t *testing.T) {
	dir := t.TempDir()
	for name, tt := range map[string]struct{ content, want string }{
		"wrong kind":     {"apiVersion: v1\nkind: Pod\n", "want kind KubeletConfiguration"},
		"bad duration":   {"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsyncFrequency: soon\n", "kubelet config file"},
		"invalid values": {"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: -1\npodLogsDir: relative\n", "maxPods must not be negative"},
		"system cgroups without cgroup root": {"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsystemCgroups: /system\ncgroupRoot: \"\"\n",
			"invalid configuration: systemCgroups (--system-cgroups) was specified and cgroupRoot (--cgroup-root) was not specified"},
		"system cgroups": {"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsystemCgroups: /system\ncgroupRoot: /\n",
			`systemCgroups (--system-cgroups) "/system" is not supported by nodelet`},
		"relative kubelet cgroups": {"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nkubeletCgroups: kubelet.slice\n",
			"kubeletCgroups (--kubelet-cgroups) must be an absolute cgroup name"},
		"log query without handler": {"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nenableSystemLogQuery: true\nenableSystemLogHandler: false\n",
			"invalid configuration: enableSystemLogHandler is required for enableSystemLogQuery"},
		"restart period too long": {"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncrashLoopBackOff: {maxContainerRestartPeriod: 301s}\n",
			"invalid configuration: CrashLoopBackOff.MaxContainerRestartPeriod (got: 301 seconds) must be set between 1s and 300s"},
		"restart period without its gate": {"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates: {KubeletCrashLoopBackOffMax: false}\ncrashLoopBackOff: {maxContainerRestartPeriod: 30s}\n",
			"invalid configuration: FeatureGate KubeletCrashLoopBackOffMax not enabled, CrashLoopBackOff.MaxContainerRestartPeriod must not be set"},
		"negative maxOpenFiles": {"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxOpenFiles: -1\n",
			"invalid configuration: maxOpenFiles (--max-open-files) -1 must not be a negative number"},
		"oomScoreAdj out of range": {"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\noomScoreAdj: -1001\n",
			"invalid configuration: oomScoreAdj (--oom-score-adj) -1001 must be between -1000 and 1000, inclusive"},
		"read-only port without the server": {"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nenableServer: false\nreadOnlyPort: 10255\n",
			"readOnlyPort 10255 with enableServer false is not supported by nodelet"},
		"swap behaviour": {"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmemorySwap: {swapBehavior: UnlimitedSwap}\n",
			`invalid configuration: memorySwap.swapBehavior "UnlimitedSwap" must be one of: "", "LimitedSwap" or "NoSwap"`},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		_ = os.WriteFile(path, []byte(tt.content), 0o644)
		_, err := Parse(context.Background(), []string{"--config", path})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", name, err, tt.want)
		}
	}
	// Unknown fields are tolerated (with a warning), as upstream.
	path := filepath.Join(dir, "unknown")
	_ = os.WriteFile(path, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nnotAField: 1\nmaxPods: 9\n"), 0o644)
	o, err := Parse(context.Background(), []string{"--config", path})
	if err != nil || o.Config.MaxPods != 9 {
		t.Errorf("unknown field: %v, maxPods %v", err, o)
	}
}

func TestImagePullSettings(t *testing.T) {
	const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	tests := []struct {
		name          string
		file          string // body after the header; "" = no file
		args          []string
		wantSerialize bool
		wantMax       int32 // 0 = unset
		wantErr       string
	}{
		{"defaults: serialized, no limit", "", nil, true, 0, ""},
		{"file: maxParallelImagePulls alone turns serializing off", "maxParallelImagePulls: 3\n", nil, false, 3, ""},
		{"file: maxParallelImagePulls 1 stays serialized", "maxParallelImagePulls: 1\n", nil, true, 1, ""},
		{"file: parallel without a limit", "serializeImagePulls: false\n", nil, false, 0, ""},
		{"file: both", "serializeImagePulls: false\nmaxParallelImagePulls: 2\n", nil, false, 2, ""},
		{"file: a limit above 1 with serialized pulls", "serializeImagePulls: true\nmaxParallelImagePulls: 2\n", nil, false, 0,
			"maxParallelImagePulls cannot be larger than 1 unless serializeImagePulls"},
		{"file: a limit of 0", "serializeImagePulls: false\nmaxParallelImagePulls: 0\n", nil, false, 0, "maxParallelImagePulls 0 must be a positive number"},
		{"flag: --max-parallel-image-pulls alone", "", []string{"--max-parallel-image-pulls", "4"}, false, 4, ""},
		{"flags: both", "", []string{"--serialize-image-pulls=false", "--max-parallel-image-pulls", "2"}, false, 2, ""},
		{"flags: a limit above 1 with --serialize-image-pulls", "", []string{"--serialize-image-pulls=true", "--max-parallel-image-pulls", "2"}, false, 0,
			"maxParallelImagePulls cannot be larger than 1"},
		{"flag over a file that serializes", "serializeImagePulls: true\n", []string{"--max-parallel-image-pulls", "2"}, false, 0,
			"maxParallelImagePulls cannot be larger than 1"},
		{"flag over the file's limit", "maxParallelImagePulls: 3\n", []string{"--max-parallel-image-pulls", "5"}, false, 5, ""},
		{"flag: --serialize-image-pulls=false", "", []string{"--serialize-image-pulls=false"}, false, 0, ""},
		{"flag: a negative limit", "", []string{"--serialize-image-pulls=false", "--max-parallel-image-pulls=-1"}, false, 0, "must be a positive number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--hostname-override", "n"}, tt.args...)
			if tt.file != "" {
				path := filepath.Join(t.TempDir(), "config.yaml")
				if err := os.WriteFile(path, []byte(header+tt.file), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", path)
			}
			o, err := Parse(context.Background(), args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := o.Config
			max := int32(0)
			if c.MaxParallelImagePulls != nil {
				max = *c.MaxParallelImagePulls
			}
			if *c.SerializeImagePulls != tt.wantSerialize || max != tt.wantMax {
				t.Errorf("serializeImagePulls %v, maxParallelImagePulls %d; want %v, %d", *c.SerializeImagePulls, max, tt.wantSerialize, tt.wantMax)
			}
		})
	}
}

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want error
	}{
		{[]string{"--version"}, ErrVersion},
		{[]string{"--version=true"}, ErrVersion},
		{[]string{"--version=raw"}, ErrVersionRaw},
		{[]string{"--version=false", "--root-dir", "/tmp/x"}, nil},
	} {
		_, err := Parse(context.Background(), tc.args)
		if !errors.Is(err, tc.want) {
			t.Errorf("%v: %v, want %v", tc.args, err, tc.want)
		}
	}
	if _, err := Parse(context.Background(), []string{"--version=maybe"}); err == nil {
		t.Error("--version=maybe accepted")
	}
	if _, err := Parse(context.Background(), []string{"--root-dir", "/tmp/x", "stray"}); err == nil || !strings.Contains(err.Error(), `does not take any arguments, got ["stray"]`) {
		t.Errorf("a positional argument: %v", err)
	}
}

// The eviction settings as upstream: evictionHard's defaults when unset,
// only what a file sets otherwise unless mergeDefaultEvictionSettings, and
// the --eviction-* flags (the hard and soft ones with "<").
func TestEvictionSettings(t *testing.T) {
	file := func(body string) string {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		name string
		args []string
		want map[string]string
	}{
		{"defaults", nil, map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"}},
		{"file sets one: the others dropped", []string{"--config", file("evictionHard:\n  memory.available: 1Gi\n")}, map[string]string{"memory.available": "1Gi"}},
		{"file sets one and merges", []string{"--config", file("mergeDefaultEvictionSettings: true\nevictionHard:\n  memory.available: 1Gi\n")},
			map[string]string{"memory.available": "1Gi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"}},
		{"flag", []string{"--eviction-hard", "memory.available<500Mi,pid.available<1000"}, map[string]string{"memory.available": "500Mi", "pid.available": "1000"}},
		{"flag over file", []string{"--config", file("evictionHard:\n  memory.available: 1Gi\n"), "--eviction-hard", "nodefs.available<5%"}, map[string]string{"nodefs.available": "5%"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Parse(context.Background(), append([]string{"--hostname-override", "n"}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			got := o.Config.EvictionHard
			if len(got) != len(tc.want) {
				t.Fatalf("evictionHard %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("evictionHard %v, want %v", got, tc.want)
				}
			}
		})
	}
	o, err := Parse(context.Background(), []string{"--hostname-override", "n", "--eviction-soft", "memory.available<1Gi",
		"--eviction-soft-grace-period", "memory.available=1m30s", "--eviction-minimum-reclaim", "memory.available=100Mi",
		"--eviction-max-pod-grace-period", "30", "--eviction-pressure-transition-period", "30s"})
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if c.EvictionSoft["memory.available"] != "1Gi" || c.EvictionSoftGracePeriod["memory.available"] != "1m30s" ||
		c.EvictionMinimumReclaim["memory.available"] != "100Mi" || c.EvictionMaxPodGracePeriod != 30 || c.EvictionPressureTransitionPeriod.Duration != 30*time.Second {
		t.Errorf("soft %v grace %v reclaim %v max grace %d transition %v", c.EvictionSoft, c.EvictionSoftGracePeriod,
			c.EvictionMinimumReclaim, c.EvictionMaxPodGracePeriod, c.EvictionPressureTransitionPeriod)
	}
}

func TestGarbageCollectionSettings(t *testing.T) {
	o, err := Parse(context.Background(), []string{"--hostname-override", "n"})
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if *c.ImageGCHighThresholdPercent != 85 || *c.ImageGCLowThresholdPercent != 80 || c.ImageMinimumGCAge.Duration != 2*time.Minute ||
		o.ImageGCPeriod != 5*time.Minute || o.ContainerGCPeriod != time.Minute ||
		o.ContainerGC != (ContainerGCPolicy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1}) {
		t.Errorf("defaults: high %d low %d min age %v periods %v %v container GC %+v", *c.ImageGCHighThresholdPercent,
			*c.ImageGCLowThresholdPercent, c.ImageMinimumGCAge, o.ImageGCPeriod, o.ContainerGCPeriod, o.ContainerGC)
	}
	o, err = Parse(context.Background(), []string{"--hostname-override", "n", "--image-gc-high-threshold", "90", "--image-gc-low-threshold", "50",
		"--minimum-image-ttl-duration", "1m", "--maximum-dead-containers-per-container", "2", "--maximum-dead-containers", "100",
		"--minimum-container-ttl-duration", "30s", "--image-gc-period", "10s", "--container-gc-period", "5s"})
	if err != nil {
		t.Fatal(err)
	}
	c = o.Config
	if *c.ImageGCHighThresholdPercent != 90 || *c.ImageGCLowThresholdPercent != 50 || c.ImageMinimumGCAge.Duration != time.Minute ||
		o.ImageGCPeriod != 10*time.Second || o.ContainerGCPeriod != 5*time.Second ||
		o.ContainerGC != (ContainerGCPolicy{MinAge: 30 * time.Second, MaxPerPodContainer: 2, MaxContainers: 100}) {
		t.Errorf("flags: high %d low %d min age %v periods %v %v container GC %+v", *c.ImageGCHighThresholdPercent,
			*c.ImageGCLowThresholdPercent, c.ImageMinimumGCAge, o.ImageGCPeriod, o.ContainerGCPeriod, o.ContainerGC)
	}
	for args, want := range map[string]string{
		"--image-gc-high-threshold=101":                            "must be between 0 and 100",
		"--image-gc-low-threshold=85":                              "must be less than imageGCHighThresholdPercent",
		"--image-gc-low-threshold=90 --image-gc-high-threshold=80": "must be less than imageGCHighThresholdPercent",
	} {
		if _, err := Parse(context.Background(), append([]string{"--hostname-override", "n"}, strings.Fields(args)...)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "config")
	_ = os.WriteFile(path, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageMaximumGCAge: 1m\n"), 0o644)
	if _, err := Parse(context.Background(), []string{"--config", path}); err == nil || !strings.Contains(err.Error(), "must be above imageMinimumGCAge") {
		t.Errorf("imageMaximumGCAge below the minimum: %v", err)
	}
}

func TestNodeAllocatableSettings(t *testing.T) {
	o, err := Parse(context.Background(), []string{"--hostname-override", "n", "--kube-reserved", "cpu=100m,memory=100Mi",
		"--system-reserved", "memory=1Gi,pid=100", "--enforce-node-allocatable", "pods,kube-reserved,system-reserved-compressible",
		"--kube-reserved-cgroup", "/kube", "--system-reserved-cgroup", "/system"})
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if c.KubeReserved["memory"] != "100Mi" || c.SystemReserved["pid"] != "100" || strings.Join(c.EnforceNodeAllocatable, ",") != "pods,kube-reserved,system-reserved-compressible" ||
		c.KubeReservedCgroup != "/kube" || c.SystemReservedCgroup != "/system" {
		t.Errorf("flags: %v %v %v %q %q", c.KubeReserved, c.SystemReserved, c.EnforceNodeAllocatable, c.KubeReservedCgroup, c.SystemReservedCgroup)
	}
	for args, want := range map[string]string{
		"--enforce-node-allocatable=pods,kube-reserved":                                                 "kubeReservedCgroup (--kube-reserved-cgroup) must be specified when",
		"--enforce-node-allocatable=system-reserved-compressible":                                       "systemReservedCgroup (--system-reserved-cgroup) must be specified when",
		"--enforce-node-allocatable=none,pods":                                                          `may not contain additional enforcements when "none" is specified`,
		"--enforce-node-allocatable=pods,pods":                                                          `duplicated enforcements "pods"`,
		"--enforce-node-allocatable=cpus":                                                               `option "cpus" specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are`,
		"--enforce-node-allocatable=pods --cgroups-per-qos=false":                                       "cgroupsPerQOS (--cgroups-per-qos) must be set to true when \"pods\"",
		"--enforce-node-allocatable=kube-reserved,kube-reserved-compressible --kube-reserved-cgroup=/k": `both "kube-reserved" and "kube-reserved-compressible" cannot be specified together`,
	} {
		if _, err := Parse(context.Background(), append([]string{"--hostname-override", "n"}, strings.Fields(args)...)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
	if _, err := Parse(context.Background(), []string{"--hostname-override", "n", "--enforce-node-allocatable=none", "--cgroups-per-qos=false"}); err != nil {
		t.Errorf("none without QoS cgroups: %v", err)
	}
}

func TestShutdownSettings(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]string{
		"shutdownGracePeriod: 10s\nshutdownGracePeriodCriticalPods: 20s\n": "shutdownGracePeriodCriticalPods 20s must be <= shutdownGracePeriod 10s",
		"shutdownGracePeriod: 500ms\n":                                     "shutdownGracePeriod 500ms must be either zero or otherwise >= 1 sec",
		"shutdownGracePeriod: 30s\nshutdownGracePeriodByPodPriority:\n- priority: 1\n  shutdownGracePeriodSeconds: 10\n": "Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time",
		"shutdownGracePeriod: 30s\nshutdownGracePeriodCriticalPods: 10s\n":                                               "",
	} {
		path := filepath.Join(dir, "config")
		_ = os.WriteFile(path, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+body), 0o644)
		_, err := Parse(context.Background(), []string{"--config", path, "--hostname-override", "n"})
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

func TestOfflineSettings(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config")
	for _, tc := range []struct {
		body     string
		args     []string
		autonomy bool
		secrets  bool
		err      string
	}{
		{body: "", autonomy: true},
		{body: "offlineAutonomy: false\n", autonomy: false},
		{body: "offlineSecrets: true\n", autonomy: true, secrets: true},
		{body: "offlineSecrets: true\n", args: []string{"--offline-secrets=false", "--offline-autonomy=false"}},
		{body: "offlineAutonomy: yes please\n", err: "offlineAutonomy"},
		// An unknown field beside them is warned about, as upstream does.
		{body: "offlineSecrets: true\nnotAField: 1\n", autonomy: true, secrets: true},
	} {
		_ = os.WriteFile(path, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+tc.body), 0o644)
		o, err := Parse(context.Background(), append([]string{"--config", path, "--hostname-override", "n"}, tc.args...))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error with %q", tc.body, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q %v: %v", tc.body, tc.args, err)
			continue
		}
		if o.Offline.Autonomy != tc.autonomy || o.Offline.Secrets != tc.secrets {
			t.Errorf("%q %v: %+v, want autonomy %v secrets %v", tc.body, tc.args, o.Offline, tc.autonomy, tc.secrets)
		}
	}
}

// --kubelet-cgroups and --runtime-cgroups are taken (the summary's kubelet
// and runtime system containers; nodelet moves itself into the former).
func TestSystemCgroupFlags(t *testing.T) {
	o, err := Parse(context.Background(), []string{"--kubelet-cgroups=/kubelet.slice", "--runtime-cgroups=/system.slice/containerd.service"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Config.KubeletCgroups != "/kubelet.slice" || o.RuntimeCgroups != "/system.slice/containerd.service" {
		t.Fatalf("kubeletCgroups %q, runtime cgroups %q", o.Config.KubeletCgroups, o.RuntimeCgroups)
	}
}

// --cloud-provider: "" and "external" are taken; a built-in provider is
// refused with upstream's message.
func TestCloudProviderFlag(t *testing.T) {
	for _, tt := range []struct {
		arg, want, err string
	}{
		{"", "", ""},
		{"--cloud-provider=external", "external", ""},
		{"--cloud-provider=aws", "", `cloud provider "aws" was specified, but built-in cloud providers are disabled`},
	} {
		var args []string
		if tt.arg != "" {
			args = []string{tt.arg}
		}
		o, err := Parse(context.Background(), args)
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want %q", tt.arg, err, tt.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tt.arg, err)
		case o.CloudProvider != tt.want:
			t.Errorf("%q: CloudProvider %q, want %q", tt.arg, o.CloudProvider, tt.want)
		}
	}
}

func TestCrashLoopBackOffMax(t *testing.T) {
	dir := t.TempDir()
	for name, tt := range map[string]struct {
		content string
		want    time.Duration
	}{
		"default":        {"", 300 * time.Second},
		"set":            {"crashLoopBackOff: {maxContainerRestartPeriod: 5s}\n", 5 * time.Second},
		"gate off":       {"featureGates: {KubeletCrashLoopBackOffMax: false}\n", 0},
		"gate on, unset": {"featureGates: {KubeletCrashLoopBackOffMax: true}\n", 300 * time.Second},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		_ = os.WriteFile(path, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+tt.content), 0o644)
		o, err := Parse(context.Background(), []string{"--config", path})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := CrashLoopBackOffMax(&o.Config); got != tt.want {
			t.Errorf("%s: %v, want %v", name, got, tt.want)
		}
	}
}

// logging.verbosity and logging.vmodule from the file set klog's, unless
// the flags are given.
func TestLoggingSettings(t *testing.T) {
	fs := klogFlagSet()
	prevV, prevVModule := fs.Lookup("v").Value.String(), fs.Lookup("vmodule").Value.String()
	t.Cleanup(func() {
		_ = fs.Set("v", prevV)
		_ = fs.Set("vmodule", prevVModule)
	})
	path := filepath.Join(t.TempDir(), "config.yaml")
	_ = os.WriteFile(path, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+
		"logging:\n  verbosity: 3\n  vmodule:\n  - {filePattern: sync*, verbosity: 5}\n"), 0o644)
	if _, err := Parse(context.Background(), []string{"--config", path}); err != nil {
		t.Fatal(err)
	}
	if v, vm := fs.Lookup("v").Value.String(), fs.Lookup("vmodule").Value.String(); v != "3" || vm != "sync*=5" {
		t.Fatalf("from the file: v %q, vmodule %q", v, vm)
	}
	if _, err := Parse(context.Background(), []string{"--config", path, "-v=6", "--vmodule=podsync*=2"}); err != nil {
		t.Fatal(err)
	}
	if v, vm := fs.Lookup("v").Value.String(), fs.Lookup("vmodule").Value.String(); v != "6" || vm != "podsync*=2" {
		t.Fatalf("flags over the file: v %q, vmodule %q", v, vm)
	}
}

// enableServer in the file is --enable-server's default; the flag wins.
func TestEnableServerFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	_ = os.WriteFile(path, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nenableServer: false\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--config", path}, false},
		{[]string{"--config", path, "--enable-server=true"}, true},
		{[]string{"--enable-server=false"}, false},
	} {
		o, err := Parse(context.Background(), tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if o.EnableServer != tc.want || o.Config.EnableServer == nil || *o.Config.EnableServer != tc.want {
			t.Errorf("%v: EnableServer %v (config %v), want %v", tc.args, o.EnableServer, o.Config.EnableServer, tc.want)
		}
	}
}

// Upstream's flags of the configuration fields set them; a field nodelet
// refuses is refused from its flag as from the file, naming the field.
func TestUpstreamFieldFlags(t *testing.T) {
	o, err := Parse(context.Background(), []string{"--feature-gates=KubeletCrashLoopBackOffMax=true", "--oom-score-adj=-500",
		"--max-open-files=65536", "--pod-cidr=10.1.0.0/24", "--pod-max-pids=4096", "--rotate-server-certificates",
		"--cpu-cfs-quota=false", "--cpu-cfs-quota-period=50ms", "--event-qps=10", "--kube-api-qps=20", "--node-status-max-images=10"})
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if !c.FeatureGates["KubeletCrashLoopBackOffMax"] || *c.OOMScoreAdj != -500 || c.MaxOpenFiles != 65536 || c.PodCIDR != "10.1.0.0/24" ||
		*c.PodPidsLimit != 4096 || !c.ServerTLSBootstrap || *c.CPUCFSQuota || c.CPUCFSQuotaPeriod.Duration != 50*time.Millisecond ||
		*c.EventRecordQPS != 10 || *c.KubeAPIQPS != 20 || *c.NodeStatusMaxImages != 10 {
		t.Errorf("flags not applied: %+v", c)
	}
	for flag, field := range map[string]string{
		"--cpu-manager-policy=dynamic":             "cpuManagerPolicy",
		"--topology-manager-policy=strict":         "topologyManagerPolicy",
		"--qos-reserved=memory=50%":                "qosReserved",
		"--reserved-cpus=zero":                     "reservedSystemCPUs",
		"--registry-qps=3":                         "registryPullQPS",
		"--manifest-url=ftp://127.0.0.1/p":         "staticPodURL",
		"--feature-gates=NoSuchGate=true":          "NoSuchGate",
		"--local-storage-capacity-isolation=false": "localStorageCapacityIsolation",
	} {
		if _, err := Parse(context.Background(), []string{flag}); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want an error naming %s", flag, err, field)
		}
	}
}

// TestManifestURLFlags: upstream's --manifest-url, --http-check-frequency
// and --manifest-url-header (name:value pairs split on commas, repeated
// flags appending values, as cliflag's ColonSeparatedMultimapStringString).
func TestManifestURLFlags(t *testing.T) {
	o, err := Parse(context.Background(), []string{"--hostname-override", "n", "--manifest-url", "http://127.0.0.1:8080/pods",
		"--http-check-frequency", "7s", "--manifest-url-header", "a:hello,b:again,c:world", "--manifest-url-header", "b:beautiful"})
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	want := map[string][]string{"a": {"hello"}, "b": {"again", "beautiful"}, "c": {"world"}}
	if c.StaticPodURL != "http://127.0.0.1:8080/pods" || c.HTTPCheckFrequency.Duration != 7*time.Second || !reflect.DeepEqual(c.StaticPodURLHeader, want) {
		t.Errorf("url %q, period %v, headers %v; want headers %v", c.StaticPodURL, c.HTTPCheckFrequency.Duration, c.StaticPodURLHeader, want)
	}
}

// TestMemoryManagerValidation: memoryManagerPolicy's names, upstream's
// reservedMemory validation, and --reserved-memory as upstream parses it
// (each occurrence appended; ';' separates NUMA nodes).
func TestMemoryManagerValidation(t *testing.T) {
	o, err := Parse(context.Background(), []string{"--hostname-override", "n", "--memory-manager-policy", "Static",
		"--reserved-memory", "0:memory=1Gi,hugepages-2Mi=4Mi;1:memory=512Mi", "--reserved-memory", "2:memory=1Mi"})
	if err != nil {
		t.Fatal(err)
	}
	r := o.Config.ReservedMemory
	if o.Config.MemoryManagerPolicy != "Static" || len(r) != 3 || r[0].NumaNode != 0 || r[0].Limits["hugepages-2Mi"] != resource.MustParse("4Mi") ||
		r[1].NumaNode != 1 || r[2].Limits[v1.ResourceMemory] != resource.MustParse("1Mi") {
		t.Errorf("--reserved-memory: %+v", r)
	}
	for args, want := range map[string]string{
		"--memory-manager-policy=static":              `memoryManagerPolicy (--memory-manager-policy) "static": unknown policy (None or Static)`,
		"--reserved-memory=0:cpu=1":                   `memory type conversion error, unknown type: "cpu"`,
		"--reserved-memory=x:memory=1Gi":              "failed to convert the NUMA node ID, expected integer, got x",
		"--reserved-memory=0":                         "the reserved memory has incorrect format",
		"--reserved-memory=0:memory=0":                `reserved memory may not be zero for NUMA node 0 and resource "memory"`,
		"--reserved-memory=0:memory=1Gi;0:memory=1Gi": `the reserved memory has a duplicate value for NUMA node 0 and resource "memory"`,
	} {
		if _, err := Parse(context.Background(), append([]string{"--hostname-override", "n"}, strings.Fields(args)...)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

// TestCPUManagerPolicyOptionsFlag: upstream's --cpu-manager-policy-options
// does not split on commas (NoSplit): a value with one is one option's
// value (refused as not a boolean), options come one flag each.
func TestCPUManagerPolicyOptionsFlag(t *testing.T) {
	o, err := Parse(context.Background(), []string{"--hostname-override", "n", "--cpu-manager-policy", "static", "--reserved-cpus", "0",
		"--cpu-manager-policy-options", "full-pcpus-only=true", "--cpu-manager-policy-options", "strict-cpu-reservation=true"})
	if err != nil {
		t.Fatal(err)
	}
	if got := o.Config.CPUManagerPolicyOptions; len(got) != 2 || got["full-pcpus-only"] != "true" || got["strict-cpu-reservation"] != "true" {
		t.Errorf("two flags: %v", got)
	}
	_, err = Parse(context.Background(), []string{"--hostname-override", "n", "--cpu-manager-policy", "static", "--reserved-cpus", "0",
		"--cpu-manager-policy-options", "full-pcpus-only=true,strict-cpu-reservation=true"})
	if err == nil || !strings.Contains(err.Error(), `bad value for option "full-pcpus-only"`) {
		t.Errorf("a comma in the value: %v", err)
	}
}

// TestTopologyManagerValidation: upstream's names and options.
func TestTopologyManagerValidation(t *testing.T) {
	o, err := Parse(context.Background(), []string{"--hostname-override", "n", "--topology-manager-policy", "single-numa-node",
		"--topology-manager-scope", "pod", "--topology-manager-policy-options", "prefer-closest-numa-nodes=true"})
	if err != nil {
		t.Fatal(err)
	}
	if c := o.Config; c.TopologyManagerPolicy != "single-numa-node" || c.TopologyManagerScope != "pod" || c.TopologyManagerPolicyOptions["prefer-closest-numa-nodes"] != "true" {
		t.Errorf("flags: %+v", c)
	}
	for args, want := range map[string]string{
		"--topology-manager-policy=strict":                                  `topologyManagerPolicy (--topology-manager-policy) "strict" must be one of`,
		"--topology-manager-scope=node":                                     `topologyManagerScope (--topology-manager-scope) "node" must be one of: "container", or "pod"`,
		"--topology-manager-policy-options=max-allowable-numa-nodes=4":      `the minimum value of "max-allowable-numa-nodes" should not be less than 8`,
		"--topology-manager-policy-options=prefer-furthest-numa-nodes=true": `unknown Topology Manager Policy option: "prefer-furthest-numa-nodes"`,
	} {
		if _, err := Parse(context.Background(), append([]string{"--hostname-override", "n"}, strings.Fields(args)...)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}
