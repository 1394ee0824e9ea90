package kuberuntime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
