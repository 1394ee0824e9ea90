package volumes

import "testing"

func TestTmpfsOptions(t *testing.T) {
	for _, tt := range []struct {
		opts   string
		noswap bool
		want   string
	}{
		{"", false, ""},
		{"", true, "noswap"},
		{"size=1048576", false, "size=1048576"},
		{"size=1048576", true, "size=1048576,noswap"},
		{"mode=0755", true, "mode=0755,noswap"},
	} {
		if got := tmpfsOptions(tt.opts, tt.noswap); got != tt.want {
			t.Errorf("tmpfsOptions(%q, %v) = %q, want %q", tt.opts, tt.noswap, got, tt.want)
		}
	}
}
