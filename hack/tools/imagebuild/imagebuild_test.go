package imagebuild

import (
	"os"
	"strings"
	"testing"
)

func TestBusyboxEntries(t *testing.T) {
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Fatal("no /bin/busybox: make stack-up installs busybox-static")
	}
	for _, flat := range []bool{false, true} {
		entries, err := busyboxEntries("/bin/busybox", Passwd, Group, map[string]bool{"bin/sh": true}, flat)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, e := range entries {
			if seen[e.Name] {
				t.Errorf("flat=%v: %s twice", flat, e.Name)
			}
			seen[e.Name] = true
			if flat && e.Link != "" && !strings.HasPrefix(e.Name, "bin/") {
				t.Errorf("flat: applet %s outside bin/", e.Name)
			}
		}
		if seen["bin/sh"] {
			t.Errorf("flat=%v: bin/sh not skipped", flat)
		}
		if flat && !seen["bin/sysctl"] {
			t.Error("flat: no bin/sysctl")
		}
	}
}

func TestHostBinary(t *testing.T) {
	have := map[string]bool{"bin/": true}
	entries, err := HostBinary("/bin/bash", "/bin/bash", have)
	if err != nil {
		t.Fatal(err)
	}
	files := false
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
		isDir := strings.HasSuffix(e.Name, "/")
		if isDir && files {
			t.Errorf("directory %s after a file", e.Name)
		}
		files = files || !isDir
		if e.Name == "bin/" {
			t.Error("bin/ added again")
		}
	}
	joined := strings.Join(names, " ")
	if !strings.Contains(joined, "bin/bash") || !strings.Contains(joined, "libc.so.6") || !strings.Contains(joined, "ld-linux") {
		t.Errorf("entries %s", joined)
	}
}
