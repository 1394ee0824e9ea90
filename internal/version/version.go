package version

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	apiversion "k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/yaml"
)

// Kubelet is the kubelet version nodelet implements: the API contract, the
// flags and the KubeletConfiguration of upstream's kubelet of that version.
const Kubelet = "v1.37.2"

// Info is nodelet's version: the kubelet version it stands in for, and its
// own build.
type Info struct {
	// KubeletVersion is shaped as upstream's version.Info; its gitCommit,
	// gitTreeState and buildDate are nodelet's build (the date is the
	// commit's, so a build is reproducible).
	KubeletVersion apiversion.Info `json:"kubeletVersion"`
	// Agent names the implementation.
	Agent Agent `json:"agent"`
}

// Agent is the implementation behind the kubelet version.
type Agent struct {
	Name string `json:"name"`
	// Version is the short VCS revision ("unknown" when the binary was
	// built outside a repository), with "-dirty" for a modified tree.
	Version string `json:"version"`
}

// Get returns the version of this binary.
func Get() Info {
	return get(debug.ReadBuildInfo)
}

func get(read func() (*debug.BuildInfo, bool)) Info {
	major, minor := majorMinor(Kubelet)
	info := apiversion.Info{
		Major: major, Minor: minor, GitVersion: Kubelet,
		GoVersion: runtime.Version(), Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
	short := "unknown"
	if bi, ok := read(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.GitCommit = s.Value
				short = s.Value[:min(len(s.Value), 7)]
			case "vcs.modified":
				info.GitTreeState = map[string]string{"true": "dirty", "false": "clean"}[s.Value]
			case "vcs.time":
				info.BuildDate = s.Value
			}
		}
	}
	if short != "unknown" && info.GitTreeState == "dirty" {
		short += "-dirty"
	}
	return Info{KubeletVersion: info, Agent: Agent{Name: "nodelet", Version: short}}
}

// majorMinor splits "v1.37.2" into "1" and "37".
func majorMinor(v string) (string, string) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return "", ""
	}
	return parts[0], parts[1]
}

// Short is what --version prints, as upstream's kubelet: "Kubernetes
// v1.37.2" (kubeadm's preflight parses exactly this line).
func Short() string { return "Kubernetes " + Kubelet }

// Raw is what --version=raw prints, as upstream: the Go syntax of the
// version.Info.
func (i Info) Raw() string { return fmt.Sprintf("%#v", i.KubeletVersion) }

// Format renders i for `nodelet version -o FORMAT`: "" (text), "json" or
// "yaml".
func (i Info) Format(format string) (string, error) {
	switch format {
	case "":
		v := i.KubeletVersion
		built := ""
		if v.BuildDate != "" {
			built = ", committed " + v.BuildDate
		}
		return fmt.Sprintf("Kubelet Version: %s\nnodelet: %s (%s%s, %s)\n", v.GitVersion, i.Agent.Version, v.GoVersion, built, v.Platform), nil
	case "json":
		b, err := json.MarshalIndent(i, "", "  ")
		return string(b) + "\n", err
	case "yaml":
		b, err := yaml.Marshal(i)
		return string(b), err
	}
	return "", fmt.Errorf("--output must be 'yaml' or 'json', not %q", format)
}
