package config

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// jsonPaths walks t by its JSON names: the leaves (scalars, maps, lists and
// types with their own JSON form, as durations) in the type's order, and
// every path, structs included. TypeMeta (apiVersion, kind) is left out.
func jsonPaths(t reflect.Type, prefix string, leaves *[]string, all map[string]bool) {
	marshaler := reflect.TypeFor[json.Marshaler]()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() || sf.Type == reflect.TypeFor[metav1.TypeMeta]() {
			continue
		}
		tag, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		ft := sf.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if sf.Anonymous && tag == "" && ft.Kind() == reflect.Struct {
			jsonPaths(ft, prefix, leaves, all) // inlined
			continue
		}
		if tag == "" {
			tag = sf.Name
		}
		path := prefix + tag
		all[path] = true
		if ft.Kind() == reflect.Struct && !ft.Implements(marshaler) && !reflect.PointerTo(ft).Implements(marshaler) {
			jsonPaths(ft, path+".", leaves, all)
			continue
		}
		*leaves = append(*leaves, path)
	}
}

func configPaths() (leaves []string, all map[string]bool) {
	all = map[string]bool{}
	jsonPaths(reflect.TypeFor[kubeletv1beta1.KubeletConfiguration](), "", &leaves, all)
	return leaves, all
}

// covering is the entry of fieldStatuses whose path is leaf or one of its
// parents.
func covering(leaf string) (FieldStatus, bool) {
	for _, f := range fieldStatuses {
		if leaf == f.Path || strings.HasPrefix(leaf, f.Path+".") {
			return f, true
		}
	}
	return FieldStatus{}, false
}

// Every field of the v1beta1 type has a status: a field added upstream and
// not yet in fieldStatuses fails here. Every entry names a field, once, in
// the type's order, and is complete for its status.
func TestEveryFieldHasAStatus(t *testing.T) {
	leaves, all := configPaths()
	if len(leaves) < 100 {
		t.Fatalf("the walk found %d fields only", len(leaves))
	}
	for _, leaf := range leaves {
		if _, ok := covering(leaf); !ok {
			t.Errorf("KubeletConfiguration field %s has no entry in fieldStatuses (internal/config/fields.go) nor in docs/configuration.md: decide whether nodelet honours it, refuses it or (only where upstream ignores it) warns", leaf)
		}
	}
	// The entries in the order of the leaves they cover.
	order := map[string]int{}
	for i, leaf := range leaves {
		if f, ok := covering(leaf); ok {
			if _, seen := order[f.Path]; !seen {
				order[f.Path] = i
			}
		}
	}
	seen := map[string]bool{}
	last := -1
	for _, f := range fieldStatuses {
		switch {
		case !all[f.Path]:
			t.Errorf("fieldStatuses has %q, which is not a KubeletConfiguration field", f.Path)
			continue
		case seen[f.Path]:
			t.Errorf("fieldStatuses has %q twice", f.Path)
		}
		seen[f.Path] = true
		for _, g := range fieldStatuses {
			if strings.HasPrefix(g.Path, f.Path+".") {
				t.Errorf("fieldStatuses has both %q and %q, which it covers", f.Path, g.Path)
			}
		}
		if i := order[f.Path]; i < last {
			t.Errorf("fieldStatuses: %q is out of the type's order", f.Path)
		} else {
			last = i
		}
		switch f.Status {
		case Honoured:
			if f.Note == "" {
				t.Errorf("%s: honoured without a note", f.Path)
			}
		case Refused:
			if f.RefusedBy == "" && f.check == nil && f.Why == "" {
				t.Errorf("%s: refused without a reason (Why)", f.Path)
			}
		case Warned:
			if f.Why == "" {
				t.Errorf("%s: warned without a reason (Why)", f.Path)
			}
		default:
			t.Errorf("%s: status %q (want honoured, refused or warned)", f.Path, f.Status)
		}
		if f.Status != Refused && len(f.Accept) > 0 {
			t.Errorf("%s: Accept on a %s field", f.Path, f.Status)
		}
		for _, a := range f.Accept {
			if !json.Valid([]byte(a)) {
				t.Errorf("%s: Accept %q is not JSON", f.Path, a)
			}
		}
		for _, s := range []string{f.Note, f.Test} {
			if strings.ContainsAny(s, "|\n") {
				t.Errorf("%s: %q would break the docs table", f.Path, s)
			}
		}
	}
}

// docsTable is the field table of docs/configuration.md: path and status of
// each row, in order.
func docsTable(t *testing.T) [][2]string {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows [][2]string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "| field | status |") {
			in = true
			continue
		}
		if !in || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| ---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 4 {
			t.Errorf("docs/configuration.md: row %q has %d cells, want 4", line, len(cells))
			continue
		}
		rows = append(rows, [2]string{strings.Trim(strings.TrimSpace(cells[0]), "`"), strings.TrimSpace(cells[1])})
	}
	return rows
}

// docs/configuration.md lists the fields of fieldStatuses, in its order,
// with the same statuses.
func TestDocsTableMatches(t *testing.T) {
	rows := docsTable(t)
	var want [][2]string
	for _, f := range fieldStatuses {
		want = append(want, [2]string{f.Path, string(f.Status)})
	}
	if reflect.DeepEqual(rows, want) {
		return
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r[0]] = r[1]
	}
	for _, w := range want {
		if s, ok := got[w[0]]; !ok {
			t.Errorf("docs/configuration.md lacks %s", w[0])
		} else if s != w[1] {
			t.Errorf("docs/configuration.md: %s is %q, fieldStatuses says %q", w[0], s, w[1])
		}
	}
	inTable := map[string]bool{}
	for _, w := range want {
		inTable[w[0]] = true
	}
	for _, r := range rows {
		if !inTable[r[0]] {
			t.Errorf("docs/configuration.md lists %s, which fieldStatuses does not", r[0])
		}
	}
	if len(rows) != len(want) {
		t.Errorf("docs/configuration.md lists %d fields, fieldStatuses %d", len(rows), len(want))
	}
	if !t.Failed() {
		t.Errorf("docs/configuration.md lists the fields in another order than fieldStatuses")
	}
	var b strings.Builder
	for _, f := range fieldStatuses {
		b.WriteString(docsRow(f) + "\n")
	}
	t.Logf("the table's rows from fieldStatuses:\n%s", b.String())
}

func docsRow(f FieldStatus) string {
	return "| `" + f.Path + "` | " + string(f.Status) + " | " + f.Note + " | " + f.Test + " |"
}

// configFrom is the configuration of a JSON document, defaulted.
func configFrom(t *testing.T, doc string) *kubeletv1beta1.KubeletConfiguration {
	t.Helper()
	c := &kubeletv1beta1.KubeletConfiguration{}
	if err := json.Unmarshal([]byte(doc), c); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	SetDefaults(c)
	return c
}

// atPath is a JSON document setting path to value.
func atPath(path, value string) string {
	parts := strings.Split(path, ".")
	doc := value
	for i := len(parts) - 1; i >= 0; i-- {
		doc = `{"` + parts[i] + `":` + doc + `}`
	}
	return doc
}

// refusedValues are values nodelet refuses, for every field refused by
// checkUnsupported's comparison or by Validate.
var refusedValues = map[string]string{
	"tlsCurvePreferences":                       `[23]`,
	"registryPullQPS":                           `10`,
	"registryBurst":                             `20`,
	"imagePullCredentialsVerificationPolicy":    `"Sometimes"`,
	"preloadedImagesVerificationAllowlist":      `["registry.k8s.io/pause"]`,
	"enableContentionProfiling":                 `true`,
	"systemCgroups":                             `"/system.slice"`,
	"singleProcessOOMKill":                      `true`,
	"topologyManagerPolicy":                     `"single-numa"`,
	"topologyManagerScope":                      `"node"`,
	"topologyManagerPolicyOptions":              `{"prefer-furthest-numa-nodes":"true"}`,
	"qosReserved":                               `{"memory":"50%"}`,
	"runOnce":                                   `true`,
	"podsPerCore":                               `10`,
	"enableControllerAttachDetach":              `false`,
	"protectKernelDefaults":                     `true`,
	"configMapAndSecretChangeDetectionStrategy": `"Get"`,
	"showHiddenMetricsForVersion":               `"1.36"`,
	"defaultPodSysctls":                         `{"net.ipv4.ip_forward":"1"}`,
	"volumePluginDir":                           `"/opt/flexvolume/"`,
	"logging.format":                            `"json"`,
	"logging.flushFrequency":                    `"1s"`,
	"logging.options":                           `{"text":{"splitStream":true}}`,
	"enableProfilingHandler":                    `false`,
	"memoryThrottlingFactor":                    `0.9`,
	"memoryReservationPolicy":                   `"TieredReservation"`,
	"tracing":                                   `{"samplingRatePerMillion":2000000}`,
	"localStorageCapacityIsolation":             `false`,
}

// Defaults pass; every refused field set to a value nodelet does not
// implement is refused with its path named; the values a refused field
// accepts pass.
func TestUnsupportedFieldsRefused(t *testing.T) {
	if err := Validate(configFrom(t, `{}`)); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, f := range fieldStatuses {
		if f.Status != Refused || f.check != nil {
			continue
		}
		t.Run(f.Path, func(t *testing.T) {
			if f.UpstreamDefault != "" {
				if err := Validate(configFrom(t, atPath(f.Path, f.UpstreamDefault))); err != nil {
					t.Errorf("upstream's default %s: %v", atPath(f.Path, f.UpstreamDefault), err)
				}
			}
			bad, ok := refusedValues[f.Path]
			if !ok && f.UpstreamDefault != "" && len(f.Accept) > 0 {
				return // a boolean whose two values are accepted, upstream's default with a warning
			}
			if !ok {
				t.Fatalf("no refused value for %s in refusedValues", f.Path)
			}
			doc := atPath(f.Path, bad)
			if f.Path == "systemCgroups" {
				doc = `{"systemCgroups":"/system.slice","cgroupRoot":"/"}`
			}
			err := Validate(configFrom(t, doc))
			if err == nil || !strings.Contains(err.Error(), f.Path) {
				t.Errorf("%s: Validate = %v, want an error naming %s", doc, err, f.Path)
			} else {
				t.Log(err)
			}
			for _, a := range f.Accept {
				if err := Validate(configFrom(t, atPath(f.Path, a))); err != nil {
					t.Errorf("%s: %v", atPath(f.Path, a), err)
				}
			}
		})
	}
	file := filepath.Join(t.TempDir(), "pod.yaml")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ doc, want string }{
		"a gate nodelet acts on":         {`{"featureGates":{"EventedPLEG":false,"KubeletCrashLoopBackOffMax":false}}`, ""},
		"a gate at its default":          {`{"featureGates":{"RotateKubeletServerCertificate":true,"NodeSwap":true}}`, ""},
		"a gate at what nodelet does":    {`{"featureGates":{"MemoryQoS":false,"KubeletEnsureSecretPulledImages":false}}`, ""},
		"a gate nodelet does not act on": {`{"featureGates":{"DefaultPodSysctls":true}}`, "featureGates: DefaultPodSysctls=true is not supported by nodelet"},
		"shutdown by priority gate off":  {`{"featureGates":{"GracefulNodeShutdownBasedOnPodPriority":false},"shutdownGracePeriod":"30s"}`, ""},
		"shutdown by priority without its gate": {`{"featureGates":{"GracefulNodeShutdownBasedOnPodPriority":false},"shutdownGracePeriodByPodPriority":[{"priority":0,"shutdownGracePeriodSeconds":10}]}`,
			"Specifying shutdownGracePeriodByPodPriority requires feature gate GracefulNodeShutdownBasedOnPodPriority"},
		"shutdown without its gate": {`{"featureGates":{"GracefulNodeShutdown":false},"shutdownGracePeriod":"30s"}`, "requires feature gate GracefulNodeShutdown"},
		"MemoryQoS on":              {`{"featureGates":{"MemoryQoS":true}}`, "featureGates: MemoryQoS=true is not supported by nodelet"},
		"all alpha gates":           {`{"featureGates":{"AllAlpha":true}}`, "featureGates: AllAlpha=true is not supported by nodelet"},
		"a locked gate":             {`{"featureGates":{"NodeSwap":false}}`, "featureGates: cannot set feature gate NodeSwap to false, feature is locked to true"},
		"an unknown gate":           {`{"featureGates":{"NoSuchGate":true}}`, "featureGates: unrecognized feature gate: NoSuchGate"},
		"a manifest URL":            {`{"staticPodURL":"https://127.0.0.1/pods","staticPodURLHeader":{"X-Token":["t"]},"httpCheckFrequency":"5s"}`, ""},
		"headers without a URL, as upstream's drop-in test": {`{"staticPodURLHeader":{"custom-static-pod":["Authorization: 223EWRWER"]}}`, ""},
		"a manifest URL not http":                           {`{"staticPodURL":"file:///etc/pods"}`, `staticPodURL "file:///etc/pods" is not an http or https URL`},
		"a manifest URL without host":                       {`{"staticPodURL":"http:///pods"}`, `staticPodURL "http:///pods" is not an http or https URL`},
		"a manifest URL never polled":                       {`{"staticPodURL":"http://127.0.0.1/pods","httpCheckFrequency":"-1s"}`, "httpCheckFrequency must be positive with a staticPodURL, got -1s"},
		"hairpinMode as upstream accepts":                   {`{"hairpinMode":"hairpin-veth"}`, ""},
		"hairpinMode invalid":                               {`{"hairpinMode":"bogus"}`, `invalid configuration: option "bogus" specified for hairpinMode`},
		"iptables bits":                                     {`{"iptablesMasqueradeBit":14,"iptablesDropBit":15}`, ""},
		"iptablesDropBit out of range":                      {`{"iptablesDropBit":32}`, "iptablesDropBit (--iptables-drop-bit) 32 must be between 0 and 31"},
		"iptablesMasqueradeBit negative":                    {`{"iptablesMasqueradeBit":-1}`, "iptablesMasqueradeBit (--iptables-masquerade-bit) -1 must be between 0 and 31"},
		"nodeStatusMaxImages all":                           {`{"nodeStatusMaxImages":-1}`, ""},
		"nodeStatusMaxImages invalid":                       {`{"nodeStatusMaxImages":-2}`, "nodeStatusMaxImages (--node-status-max-images) -2 must be -1 or greater"},
		"nodeStatusMaxImages none":                          {`{"nodeStatusMaxImages":0}`, ""},
		"streamingConnectionIdleTimeout":                    {`{"streamingConnectionIdleTimeout":"5m"}`, ""},
		"staticPodPath, a directory":                        {`{"staticPodPath":"` + t.TempDir() + `"}`, ""},
		"staticPodPath, not there yet":                      {`{"staticPodPath":"/nonexistent/manifests"}`, ""},
		"staticPodPath, a file":                             {`{"staticPodPath":"` + file + `"}`, "staticPodPath"},
		"pointers to empty structs":                         {`{"tracing":{},"userNamespaces":{}}`, ""},
		"userNamespaces.idsPerPod":                          {`{"userNamespaces":{"idsPerPod":131072}}`, ""},
		"userNamespaces.idsPerPod too small":                {`{"userNamespaces":{"idsPerPod":1024}}`, "userNamespaces.idsPerPod must not be less than 65536"},
		"a gate and a refused field at once":                {`{"topologyManagerPolicy":"strict","featureGates":{"AllBeta":true}}`, "topologyManagerPolicy"},
		"cpuManagerPolicy static":                           {`{"cpuManagerPolicy":"static","cpuManagerPolicyOptions":{"full-pcpus-only":"true"},"reservedSystemCPUs":"0"}`, ""},
		"cpuManagerPolicy unknown":                          {`{"cpuManagerPolicy":"dynamic"}`, "cpuManagerPolicy"},
		"cpuManagerPolicyOptions alpha":                     {`{"cpuManagerPolicy":"static","cpuManagerPolicyOptions":{"align-by-socket":"true"},"featureGates":{"CPUManagerPolicyAlphaOptions":true}}`, ""},
		"cpuManagerPolicyOptions exclusive":                 {`{"cpuManagerPolicy":"static","cpuManagerPolicyOptions":{"full-pcpus-only":"true","distribute-cpus-across-cores":"true"},"featureGates":{"CPUManagerPolicyAlphaOptions":true}}`, "can not be used at the same time"},
		"cpuManagerPolicyOptions alpha gate":                {`{"cpuManagerPolicy":"static","cpuManagerPolicyOptions":{"align-by-socket":"true"}}`, "Alpha-level Options not enabled"},
		"beta options gate off":                             {`{"cpuManagerPolicy":"static","featureGates":{"CPUManagerPolicyBetaOptions":false}}`, ""},
		"CustomCPUCFSQuotaPeriod off":                       {`{"cpuCFSQuotaPeriod":"50ms","featureGates":{"CustomCPUCFSQuotaPeriod":false}}`, "requires feature gate CustomCPUCFSQuotaPeriod"},
		"CustomCPUCFSQuotaPeriod off, 100ms":                {`{"featureGates":{"CustomCPUCFSQuotaPeriod":false,"PodLevelResources":false}}`, ""},
		"the CPU manager e2e's gates":                       {`{"featureGates":{"PodLevelResources":false,"InPlacePodLevelResourcesVerticalScaling":false,"PodLevelResourcesFixDefaulting":false,"PodLevelResourcesFixKubeletQOSClass":false,"PodLevelResourceManagers":false,"CPUManagerPolicyBetaOptions":false,"CPUManagerPolicyAlphaOptions":false,"CustomCPUCFSQuotaPeriod":false}}`, ""},
		"pod-level fixes off with the gate on":              {`{"featureGates":{"PodLevelResourcesFixDefaulting":false}}`, "PodLevelResourcesFixDefaulting"},
		"pod-level resize on":                               {`{"featureGates":{"InPlacePodLevelResourcesVerticalScaling":true}}`, "InPlacePodLevelResourcesVerticalScaling"},
		"cpuManagerPolicyOptions with none":                 {`{"cpuManagerPolicyOptions":{"full-pcpus-only":"true"}}`, "only valid with the static policy"},
		"reservedSystemCPUs with a cgroup":                  {`{"reservedSystemCPUs":"0","systemReservedCgroup":"/system.slice"}`, "can't use reservedSystemCPUs"},
	} {
		t.Run(name, func(t *testing.T) {
			err := Validate(configFrom(t, tc.doc))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s: %v", tc.doc, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%s: Validate = %v, want an error with %q", tc.doc, err, tc.want)
			}
		})
	}
}

// kubeadm's KubeletConfiguration (what kubeadm init and join write, its
// zero values included) starts nodelet: nothing in it is refused.
func TestKubeadmConfigAccepted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(context.Background(), []string{"--config", path, "--hostname-override", "n"}); err != nil {
		t.Fatal(err)
	}
}

// A configuration spelling out upstream's defaults (as the node e2e suite
// writes it) starts, the defaults nodelet does not apply warned about.
func TestUpstreamDefaultsAccepted(t *testing.T) {
	c := configFrom(t, `{"imagePullCredentialsVerificationPolicy":"NeverVerifyPreloadedImages",`+
		`"makeIPTablesUtilChains":true,"configMapAndSecretChangeDetectionStrategy":"Watch",`+
		`"volumePluginDir":"/usr/libexec/kubernetes/kubelet-plugins/volume/exec/","enableDebugFlagsHandler":true}`)
	if err := Validate(c); err != nil {
		t.Fatalf("upstream's defaults refused: %v", err)
	}
}
