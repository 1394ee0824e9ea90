package devicemanager

import (
	"slices"
	"testing"
)

func TestChoose(t *testing.T) {
	for _, tc := range []struct {
		name                string
		reusable, available []string
		size                int
		preferred           []string
		want                []string
		wantOK              bool
	}{
		{name: "in order", available: []string{"d3", "d1", "d2"}, size: 2, want: []string{"d1", "d2"}, wantOK: true},
		{name: "too few", available: []string{"d1"}, size: 2},
		{name: "none asked", available: []string{"d1"}, size: 0, wantOK: true},
		{name: "reused first", reusable: []string{"d9"}, available: []string{"d1", "d2"}, size: 2, want: []string{"d9", "d1"}, wantOK: true},
		{name: "reused only", reusable: []string{"d9", "d8"}, available: []string{"d1"}, size: 1, want: []string{"d8"}, wantOK: true},
		{name: "reused counts toward size", reusable: []string{"d9"}, available: []string{"d1"}, size: 2, want: []string{"d9", "d1"}, wantOK: true},
		{name: "preferred", available: []string{"d1", "d2", "d3"}, size: 2, preferred: []string{"d3"}, want: []string{"d3", "d1"}, wantOK: true},
		{name: "preferred not available ignored", available: []string{"d1", "d2"}, size: 1, preferred: []string{"d7"}, want: []string{"d1"}, wantOK: true},
		{name: "preferred after reused", reusable: []string{"d9"}, available: []string{"d1", "d2"}, size: 2, preferred: []string{"d9", "d2"}, want: []string{"d9", "d2"}, wantOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := choose(tc.reusable, tc.available, tc.size, tc.preferred)
			if ok != tc.wantOK || !slices.Equal(got, tc.want) {
				t.Fatalf("choose = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
