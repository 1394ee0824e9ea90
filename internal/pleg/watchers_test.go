package pleg

import "testing"

func TestRuntimeWatchers(t *testing.T) {
	if w := RuntimeWatchers("unix:///c.sock", nil); len(w) != 2 || w[0].(*CRIEvents).Endpoint != "unix:///c.sock" {
		t.Errorf("default: %v, want the CRI's and containerd's streams", w)
	}
	if w := RuntimeWatchers("unix:///c.sock", map[string]bool{"EventedPLEG": false}); w != nil {
		t.Errorf("EventedPLEG off: %v, want none", w)
	}
	if w := RuntimeWatchers("unix:///c.sock", map[string]bool{"EventedPLEG": true}); len(w) != 2 {
		t.Errorf("EventedPLEG on: %v", w)
	}
}
