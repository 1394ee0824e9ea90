package version

import (
	"encoding/json"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// kubeadm's preflight regexp for `kubelet --version` (cmd/kubeadm/app/preflight/utils.go).
var kubeadmVersion = regexp.MustCompile(`^\s*Kubernetes v((0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)([-\w.+]*)?)\s*$`)

func TestShortParsesAsKubeadmExpects(t *testing.T) {
	m := kubeadmVersion.FindAllStringSubmatch(strings.TrimSpace(Short()+"\n"), -1)
	if len(m) != 1 || m[0][1] != strings.TrimPrefix(Kubelet, "v") {
		t.Fatalf("%q does not parse as kubeadm's kubelet version: %v", Short(), m)
	}
}

func TestGet(t *testing.T) {
	for _, tc := range []struct {
		name       string
		settings   []debug.BuildSetting
		ok         bool
		wantAgent  string
		wantTree   string
		wantCommit string
		wantBuilt  string
	}{
		{"clean build", []debug.BuildSetting{{Key: "vcs.revision", Value: "57305fc0123456789"}, {Key: "vcs.modified", Value: "false"}, {Key: "vcs.time", Value: "2026-12-03T07:54:08Z"}}, true,
			"57305fc", "clean", "57305fc0123456789", "2026-12-03T07:54:08Z"},
		{"modified tree", []debug.BuildSetting{{Key: "vcs.revision", Value: "57305fc0123456789"}, {Key: "vcs.modified", Value: "true"}}, true,
			"57305fc-dirty", "dirty", "57305fc0123456789", ""},
		{"no vcs information", nil, true, "unknown", "", "", ""},
		{"no build information", nil, false, "unknown", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := get(func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{Settings: tc.settings}, tc.ok })
			v := i.KubeletVersion
			if i.Agent.Name != "nodelet" || i.Agent.Version != tc.wantAgent || v.GitTreeState != tc.wantTree || v.GitCommit != tc.wantCommit || v.BuildDate != tc.wantBuilt {
				t.Fatalf("got %+v", i)
			}
			if v.GitVersion != Kubelet || v.Major != "1" || v.Minor != "37" || v.GoVersion == "" || v.Platform == "" {
				t.Fatalf("kubelet version %+v", v)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	i := get(func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abcdef0123"}, {Key: "vcs.modified", Value: "false"}}}, true
	})
	js, err := i.Format("json")
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		KubeletVersion map[string]string `json:"kubeletVersion"`
		Agent          map[string]string `json:"agent"`
	}
	if err := json.Unmarshal([]byte(js), &back); err != nil {
		t.Fatal(err)
	}
	if back.KubeletVersion["gitVersion"] != Kubelet || back.KubeletVersion["gitCommit"] != "abcdef0123" || back.Agent["version"] != "abcdef0" {
		t.Fatalf("json %s", js)
	}
	y, err := i.Format("yaml")
	if err != nil || !strings.Contains(y, "gitVersion: "+Kubelet) {
		t.Fatalf("yaml %q %v", y, err)
	}
	txt, err := i.Format("")
	if err != nil || !strings.HasPrefix(txt, "Kubelet Version: "+Kubelet+"\nnodelet: abcdef0 (") {
		t.Fatalf("text %q %v", txt, err)
	}
	if _, err := i.Format("xml"); err == nil {
		t.Fatal("-o xml accepted")
	}
	if raw := i.Raw(); !strings.HasPrefix(raw, "version.Info{") || !strings.Contains(raw, `GitVersion:"`+Kubelet+`"`) {
		t.Fatalf("raw %q", raw)
	}
}
