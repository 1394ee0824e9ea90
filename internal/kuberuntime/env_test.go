package kuberuntime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

type fakeObjects struct {
	cms     map[string]*v1.ConfigMap
	secrets map[string]*v1.Secret
}

func (f fakeObjects) ConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	if cm, ok := f.cms[name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (f fakeObjects) Secret(_ context.Context, ns, name string) (*v1.Secret, error) {
	if s, ok := f.secrets[name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func TestBuildEnv(t *testing.T) {
	objects := fakeObjects{
		cms:     map[string]*v1.ConfigMap{"cfg": {Data: map[string]string{"color": "blue", "bad=key": "x", "size": "9"}}},
		secrets: map[string]*v1.Secret{"sec": {Data: map[string][]byte{"password": []byte("s3cret")}}},
	}
	services := func(ns string, links bool) (map[string]string, error) {
		env := map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
		if links {
			env["WEB_SERVICE_HOST"] = "10.0.0.9"
		}
		return env, nil
	}
	cmRef := func(name, key string, optional bool) *v1.EnvVarSource {
		return &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: &optional}}
	}
	// An emptyDir as an init container leaves it, and a symlink planted
	// in it that points out of it.
	volume := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(volume, "config.env"), []byte("# settings\nCONFIG_1='value1'\n  CONFIG_2='two\nlines' # note\nEMPTY=''\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "host.env"), []byte("SECRET='host'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "host.env"), filepath.Join(volume, "escape.env")); err != nil {
		t.Fatal(err)
	}
	volumePaths := map[string]string{"config": volume}
	fileRef := func(volume, path, key string, optional bool) *v1.EnvVarSource {
		return &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: volume, Path: path, Key: key, Optional: &optional}}
	}
	base := func() *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	}
	cases := []struct {
		name    string
		mutate  func(p *v1.Pod)
		want    map[string]string
		absent  []string
		invalid []string
		err     string
	}{
		{name: "services, both with links", want: map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "WEB_SERVICE_HOST": "10.0.0.9"}},
		{name: "enableServiceLinks false", mutate: func(p *v1.Pod) { p.Spec.EnableServiceLinks = ptr.To(false) },
			want: map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, absent: []string{"WEB_SERVICE_HOST"}},
		{name: "env wins over service", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "WEB_SERVICE_HOST", Value: "mine"}}
		}, want: map[string]string{"WEB_SERVICE_HOST": "mine"}},
		{name: "envFrom with prefix, invalid key skipped, env overrides", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{
				{Prefix: "CM_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
				{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}},
			}
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "CM_size", Value: "10"}, {Name: "MSG", Value: "$(CM_color)-$(password)-$(KUBERNETES_SERVICE_HOST)-$(NOPE)"}}
		}, want: map[string]string{"CM_color": "blue", "CM_size": "10", "password": "s3cret", "MSG": "blue-s3cret-10.0.0.1-$(NOPE)"}, invalid: []string{"CM_bad=key"}},
		{name: "configMapKeyRef and secretKeyRef", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", ValueFrom: cmRef("cfg", "color", false)},
				{Name: "B", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "password"}}}}
		}, want: map[string]string{"A": "blue", "B": "s3cret"}},
		{name: "optional missing configmap and key skipped", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", ValueFrom: cmRef("nope", "k", true)}, {Name: "B", ValueFrom: cmRef("cfg", "nokey", true)}}
			p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Optional: ptr.To(true)}}}
		}, absent: []string{"A", "B"}},
		{name: "required missing configmap", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", ValueFrom: cmRef("nope", "k", false)}}
		}, err: `configmaps "nope" not found`},
		{name: "required missing key", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", ValueFrom: cmRef("cfg", "nokey", false)}}
		}, err: "couldn't find key nokey in ConfigMap ns/cfg"},
		{name: "required missing envFrom secret", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}}}}
		}, err: `secrets "nope" not found`},
		{name: "resourceFieldRef with divisor and allocatable default", mutate: func(p *v1.Pod) {
			c := &p.Spec.Containers[0]
			c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")}
			c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")}
			c.Env = []v1.EnvVar{
				{Name: "CPU_REQ_M", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: resource.MustParse("1m")}}},
				{Name: "CPU_REQ", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "requests.cpu"}}},
				{Name: "MEM_LIM_MI", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
				{Name: "CPU_LIM", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
			}
		}, want: map[string]string{"CPU_REQ_M": "250", "CPU_REQ": "1", "MEM_LIM_MI": "128", "CPU_LIM": "4"}},
		{name: "fileKeyRef values, a later env expands them", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "ONE", ValueFrom: fileRef("config", "config.env", "CONFIG_1", false)},
				{Name: "TWO", ValueFrom: fileRef("config", "config.env", "CONFIG_2", false)}, {Name: "BOTH", Value: "$(ONE)+$(TWO)"}}
		}, want: map[string]string{"ONE": "value1", "TWO": "two\nlines", "BOTH": "value1+two\nlines"}},
		{name: "fileKeyRef optional missing or empty key skipped", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", ValueFrom: fileRef("config", "config.env", "NOPE", true)},
				{Name: "B", ValueFrom: fileRef("config", "config.env", "EMPTY", true)}}
		}, absent: []string{"A", "B"}},
		{name: "fileKeyRef required missing key", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", ValueFrom: fileRef("config", "config.env", "NOPE", false)}}
		}, err: `environment variable key "NOPE" not found in file`},
		{name: "fileKeyRef optional missing file is still an error", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", ValueFrom: fileRef("config", "absent.env", "K", true)}}
		}, err: "couldn't parse env file"},
		{name: "fileKeyRef unknown volume", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", ValueFrom: fileRef("other", "config.env", "CONFIG_1", true)}}
		}, err: `cannot find the volume "other" referenced by FileKeyRef`},
		{name: "fileKeyRef symlink out of the volume not followed", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", ValueFrom: fileRef("config", "escape.env", "SECRET", false)}}
		}, err: "couldn't parse env file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &Manager{cfg: Config{Objects: objects, ServiceEnv: services,
				NodeAllocatable: func() v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")} }}}
			pod := base()
			if tc.mutate != nil {
				tc.mutate(pod)
			}
			kvs, invalid, err := m.buildEnv(context.Background(), pod, &pod.Spec.Containers[0], podFacts{}, volumePaths)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, kv := range kvs {
				if _, dup := got[kv.Key]; dup {
					t.Fatalf("%s defined twice", kv.Key)
				}
				got[kv.Key] = string(kv.Value)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
			for _, k := range tc.absent {
				if _, ok := got[k]; ok {
					t.Errorf("%s should be absent", k)
				}
			}
			if strings.Join(invalid, ",") != strings.Join(tc.invalid, ",") {
				t.Errorf("invalid %v, want %v", invalid, tc.invalid)
			}
		})
	}
}

func TestParseEnvFile(t *testing.T) {
	cases := []struct {
		name, file, key, want, err string
	}{
		{name: "simple", file: "A='1'\nB='2'\n", key: "B", want: "2"},
		{name: "absent", file: "A='1'\n", key: "B", want: ""},
		{name: "comments, blank lines, indentation", file: "# c\n\n   \n\t  A='x y' # trailing\n", key: "A", want: "x y"},
		{name: "literal content", file: "A='$HOME \\n \"q\"'\n", key: "A", want: `$HOME \n "q"`},
		{name: "multi-line", file: "A='l1\nl2\n'\nB='b'", key: "A", want: "l1\nl2\n"},
		{name: "first definition wins", file: "A='1'\nA='2'\n", key: "A", want: "1"},
		{name: "blank after = is empty", file: "A= '1'\n", key: "A", want: ""},
		{name: "blank after = elsewhere skipped", file: "B= '1'\nA='2'\n", key: "A", want: "2"},
		{name: "equals in value", file: "A='k=v'\n", key: "A", want: "k=v"},
		{name: "blank before =", file: "A ='1'\n", key: "A", err: "whitespace before '=' is not allowed"},
		{name: "missing =", file: "A\n", key: "A", err: "line 1: missing '='"},
		{name: "empty name", file: "='1'\n", key: "A", err: "empty variable name"},
		{name: "unquoted", file: "A=1\n", key: "A", err: "must be enclosed in single quotes"},
		{name: "double quoted", file: "A=\"1\"\n", key: "A", err: "must be enclosed in single quotes"},
		{name: "content after quote", file: "A='1' x\n", key: "A", err: "line 1: unexpected content after closing quote"},
		{name: "unclosed", file: "X='1'\nA='1\n", key: "A", err: "starting at line 2: unclosed single quote"},
		{name: "a bad line before the key fails", file: "B=2\nA='1'\n", key: "A", err: "line 1"},
		{name: "a bad line after the key is not read", file: "A='1'\nB=2\n", key: "A", want: "1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseEnvFile(strings.NewReader(tc.file), tc.key)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
