package file

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/ctortest"
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

func TestNew(t *testing.T) {
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no directory", Config: Config{NodeName: "n1"}, WantErr: "Config.Dir is required"},
		{Name: "no node name", Config: Config{Dir: t.TempDir()}, WantErr: "Config.NodeName is required"},
		{Name: "a nil clock is the real one", Config: Config{Dir: t.TempDir(), NodeName: "n1"}},
	}, func(t *testing.T, s *Source) {
		ctortest.RealClock(t, s.cfg.Clock)
	})
}

func TestDecodeManifest(t *testing.T) {
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
			pods, warns, err := DecodeManifest([]byte(tt.data), "/m/f.yaml", "n1")
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

func names(pods []*v1.Pod) string {
	var n []string
	for _, p := range pods {
		n = append(n, p.Name+"/"+p.Spec.Containers[0].Image)
	}
	return strings.Join(n, ",")
}

func recv(t *testing.T, s *Source) []*v1.Pod {
	t.Helper()
	select {
	case pods := <-s.Updates():
		return pods
	case <-time.After(5 * time.Second):
		t.Fatal("no update from the source")
		return nil
	}
}

func TestSourceFollowsTheDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", strings.ReplaceAll(podYAML, "%s", "a"))
	write(".hidden.yaml", strings.ReplaceAll(podYAML, "%s", "hidden"))
	clk := testingclock.NewFakeClock(time.Now())
	s, err := New(Config{Dir: dir, NodeName: "n1", Period: 20 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)

	if got := names(recv(t, s)); got != "a-n1/busybox:1.36" {
		t.Fatalf("initial set %q", got)
	}

	// A new file arrives through fsnotify (the settle timer is on the fake clock).
	write("b.yaml", strings.ReplaceAll(podYAML, "%s", "b"))
	stepUntil(t, clk, s, func(p []*v1.Pod) bool { return len(p) == 2 })

	// A broken edit keeps the last good pod of that file.
	write("b.yaml", "kind: Pod\nmetadata: {name: [\n")
	clk.Step(21 * time.Second)
	select {
	case p := <-s.Updates():
		t.Fatalf("a broken edit changed the set: %s", names(p))
	case <-time.After(300 * time.Millisecond):
	}

	// A fixed edit replaces it; removal drops it.
	write("b.yaml", strings.ReplaceAll(strings.ReplaceAll(podYAML, "%s", "b"), "1.36", "1.37"))
	stepUntil(t, clk, s, func(p []*v1.Pod) bool { return strings.Contains(names(p), "b-n1/busybox:1.37") })
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	stepUntil(t, clk, s, func(p []*v1.Pod) bool { return names(p) == "a-n1/busybox:1.36" })
}

// stepUntil advances the fake clock until the source sends a set that ok
// accepts.
func stepUntil(t *testing.T, clk *testingclock.FakeClock, s *Source, ok func([]*v1.Pod) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		clk.Step(21 * time.Second)
		select {
		case p := <-s.Updates():
			if ok(p) {
				return
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatal("the source never sent the expected set")
}
