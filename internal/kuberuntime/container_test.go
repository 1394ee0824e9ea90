package kuberuntime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestSubPathHost(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Links a container could plant in its volume.
	_ = os.Symlink(outside, filepath.Join(root, "escape"))
	_ = os.Symlink("data", filepath.Join(root, "inside"))
	tests := []struct {
		sub     string
		want    string // relative to root; "" for an error
		wantErr string
	}{
		{sub: "data", want: "data"},
		{sub: "new/dir", want: "new/dir"},
		{sub: "inside", want: "data"},
		{sub: "../x", wantErr: "without '..'"},
		{sub: "a/../../x", wantErr: "without '..'"},
		{sub: "/etc", wantErr: "without '..'"},
		{sub: "escape", wantErr: "leads out of the volume"},
		{sub: "escape/created", wantErr: "leads out of the volume"},
	}
	for _, tt := range tests {
		got, err := subPathHost(root, tt.sub)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: %q, %v; want error %q", tt.sub, got, err, tt.wantErr)
			}
			continue
		}
		realRoot, _ := filepath.EvalSymlinks(root)
		if err != nil || got != filepath.Join(realRoot, tt.want) {
			t.Errorf("%s: %q, %v; want %s", tt.sub, got, err, tt.want)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "created")); !os.IsNotExist(err) {
		t.Error("a directory was created outside the volume")
	}
	if got := expand("$(POD)/logs", func(k string) (string, bool) { return map[string]string{"POD": "web-1"}[k], k == "POD" }); got != "web-1/logs" {
		t.Errorf("subPathExpr expansion: %q", got)
	}
}

// A subPath directory nodelet creates gets the volume root's mode, setgid
// included (an emptyDir of mode 0777 with an fsGroup: g+s), as upstream.
func TestSubPathHostMode(t *testing.T) {
	root := t.TempDir()
	if err := os.Chmod(root, 0o777|os.ModeSetgid|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	got, err := subPathHost(root, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(got), got} {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := info.Mode() & (os.ModePerm | os.ModeSetgid | os.ModeSticky); m != 0o777|os.ModeSetgid|os.ModeSticky {
			t.Errorf("%s: mode %v, want %v", p, m, 0o777|os.ModeSetgid|os.ModeSticky)
		}
	}
}

func TestImageVolumeMounts(t *testing.T) {
	m, _, _ := newTestManager(t)
	pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "example.test/artifact:1"}}},
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}}}
	paths := map[string]string{"img": "", "scratch": t.TempDir()}
	images := map[string]*runtimeapi.ImageSpec{"img": {Image: "sha256:abc", UserSpecifiedImage: "example.test/artifact:1"}}
	env := func(string) (string, bool) { return "", false }
	for _, tc := range []struct {
		name    string
		mount   v1.VolumeMount
		want    *runtimeapi.Mount
		wantErr string
	}{
		{name: "whole image, read-only whatever the mount says",
			mount: v1.VolumeMount{Name: "img", MountPath: "/v"},
			want:  &runtimeapi.Mount{ContainerPath: "/v", Readonly: true, Image: images["img"]}},
		{name: "subPath inside the image, left to the runtime",
			mount: v1.VolumeMount{Name: "img", MountPath: "/v", SubPath: "etc/conf"},
			want:  &runtimeapi.Mount{ContainerPath: "/v", Readonly: true, Image: images["img"], ImageSubPath: "etc/conf"}},
		{name: "subPath leading out", mount: v1.VolumeMount{Name: "img", MountPath: "/v", SubPath: "../etc"},
			wantErr: `volume "img": subPath "../etc" must be a relative path without '..'`},
		{name: "absolute subPath", mount: v1.VolumeMount{Name: "img", MountPath: "/v", SubPath: "/etc"},
			wantErr: `volume "img": subPath "/etc" must be a relative path without '..'`},
		{name: "another volume keeps its host path", mount: v1.VolumeMount{Name: "scratch", MountPath: "/s"},
			want: &runtimeapi.Mount{ContainerPath: "/s", HostPath: paths["scratch"]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", VolumeMounts: []v1.VolumeMount{tc.mount}}
			got, err := m.containerMounts(pod, c, paths, images, env, false)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || !proto.Equal(got[0], tc.want) {
				t.Fatalf("mounts %v, want [%v]", got, tc.want)
			}
		})
	}
}

func TestStopSignal(t *testing.T) {
	sig := func(s v1.Signal) *v1.Container {
		return &v1.Container{Name: "c", Lifecycle: &v1.Lifecycle{StopSignal: &s}}
	}
	for _, tc := range []struct {
		name    string
		gate    bool
		c       *v1.Container
		want    runtimeapi.Signal
		wantErr string
	}{
		{name: "unset", c: &v1.Container{Name: "c"}, want: runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT},
		{name: "unset, gate on", gate: true, c: &v1.Container{Name: "c"}, want: runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT},
		{name: "gate off: refused", c: sig(v1.SIGUSR1),
			wantErr: "lifecycle.stopSignal SIGUSR1 needs the feature gate ContainerStopSignals, which is off on this node"},
		{name: "SIGUSR1", gate: true, c: sig(v1.SIGUSR1), want: runtimeapi.Signal_SIGNAL_SIGUSR1},
		{name: "SIGRTMAX-2", gate: true, c: sig(v1.SIGRTMAXMINUS2), want: runtimeapi.Signal_SIGNAL_SIGRTMAXMINUS2},
		{name: "SIGRTMIN+15", gate: true, c: sig(v1.SIGRTMINPLUS15), want: runtimeapi.Signal_SIGNAL_SIGRTMINPLUS15},
		{name: "unknown", gate: true, c: sig("SIGNOPE"), wantErr: "lifecycle.stopSignal SIGNOPE is not a signal the runtime knows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Manager{cfg: Config{ContainerStopSignals: tc.gate}}
			got, err := m.stopSignal(tc.c)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	// Every CRI signal has a name that maps back to it (the status).
	for v := range runtimeapi.Signal_name {
		s := runtimeapi.Signal(v)
		if s == runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
			continue
		}
		if back := runtimeapi.Signal_value[criSignalName(string(signalName(s)))]; back != v {
			t.Errorf("%v: name %q maps back to %v", s, signalName(s), runtimeapi.Signal(back))
		}
	}
	if got := signalName(runtimeapi.Signal_SIGNAL_SIGRTMAXMINUS2); got != v1.SIGRTMAXMINUS2 {
		t.Errorf("signalName(SIGRTMAXMINUS2) = %q", got)
	}
}
