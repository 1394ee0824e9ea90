package fsutil

import "testing"

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:            "/plain",
		`/with\040space`:    "/with space",
		`/tab\011and\134bs`: "/tab\tand\\bs",
		`/end\040`:          "/end ",
		`/not\08escape`:     `/not\08escape`,
		`/short\04`:         `/short\04`,
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMountSource(t *testing.T) {
	// /proc/self is on the proc file system, whose source is "proc"; the
	// root has some source.
	for path, want := range map[string]string{"/proc/self": "proc", "/proc": "proc"} {
		if got, err := MountSource(path); err != nil || got != want {
			t.Errorf("MountSource(%s) = %q, %v; want %q", path, got, err, want)
		}
	}
	if got, err := MountSource("/"); err != nil || got == "" {
		t.Errorf("MountSource(/) = %q, %v", got, err)
	}
}
