package manifest

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/podspec"
)

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  containers:
  - name: c
    image: busybox:1.36
`

func TestDecode(t *testing.T) {
	tests := []struct {
		name      string
		data      string
		wantNames []string
		wantErr   string
		wantWarn  string
	}{
		{name: "yaml pod", data: strings.ReplaceAll(podYAML, "%s", "a"), wantNames: []string{"a-n1"}},
		{name: "json pod", data: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`, wantNames: []string{"j-n1"}},
		{name: "pod list", data: `{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"busybox"}]}},{"metadata":{"name":"y"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}]}`, wantNames: []string{"x-n1", "y-n1"}},
		{name: "two documents", data: "---\n" + strings.ReplaceAll(podYAML, "%s", "a") + "---\n" + strings.ReplaceAll(podYAML, "%s", "b"), wantNames: []string{"a-n1", "b-n1"}},
		{name: "unknown field is a warning", data: strings.ReplaceAll(podYAML, "%s", "a") + "  bogus: 1\n", wantNames: []string{"a-n1"}, wantWarn: "bogus"},
		{name: "bad yaml", data: "kind: Pod\nmetadata: {name: [\n", wantErr: "not valid YAML or JSON"},
		{name: "empty", data: "\n# nothing\n", wantErr: "empty"},
		{name: "wrong kind", data: "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", wantErr: `kind "Service" is not supported`},
		{name: "wrong version", data: "apiVersion: apps/v1\nkind: Deployment\n", wantErr: `apiVersion "apps/v1" is not supported`},
		{name: "invalid pod", data: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n", wantErr: "spec.containers: Required value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods, warns, err := Decode([]byte(tt.data), podspec.Origin{Source: podspec.FileSource, Location: "/m/f.yaml"}, "n1")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range pods {
				names = append(names, p.Name)
				if p.Spec.RestartPolicy != v1.RestartPolicyAlways || p.Annotations["kubernetes.io/config.source"] != "file" {
					t.Errorf("pod %s not defaulted as a static pod", p.Name)
				}
			}
			if strings.Join(names, ",") != strings.Join(tt.wantNames, ",") {
				t.Errorf("pods %v, want %v", names, tt.wantNames)
			}
			if tt.wantWarn != "" && (len(warns) == 0 || !strings.Contains(warns[0], tt.wantWarn)) {
				t.Errorf("warnings %v, want one about %q", warns, tt.wantWarn)
			}
		})
	}
}
