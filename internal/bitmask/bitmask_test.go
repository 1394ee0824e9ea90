package bitmask

import (
	"slices"
	"testing"
)

func TestNewBitsCount(t *testing.T) {
	m, err := New(0, 3)
	if err != nil || m.Count() != 2 || !slices.Equal(m.Bits(), []int{0, 3}) || !m.IsSet(3) || m.IsSet(1) {
		t.Errorf("New(0, 3) = %v %v", m.Bits(), err)
	}
	if _, err := New(64); err == nil {
		t.Error("New(64) accepted")
	}
	if _, err := New(-1); err == nil {
		t.Error("New(-1) accepted")
	}
}

// TestString: upstream's bitmask_test cases.
func TestString(t *testing.T) {
	for _, tc := range []struct {
		ids  []int
		want string
	}{
		{nil, "00"},
		{[]int{0}, "01"},
		{[]int{0, 1}, "11"},
		{[]int{2}, "100"}, // upstream's quirk: 4 is not > 1<<2
		{[]int{0, 3}, "1001"},
		{[]int{63}, "1000000000000000000000000000000000000000000000000000000000000000"},
	} {
		m, _ := New(tc.ids...)
		if got := m.String(); got != tc.want {
			t.Errorf("New(%v).String() = %q, want %q", tc.ids, got, tc.want)
		}
	}
}

func TestIsNarrowerThan(t *testing.T) {
	for _, tc := range []struct {
		a, b []int
		want bool
	}{
		{[]int{0}, []int{0, 1}, true},
		{[]int{0, 1}, []int{0}, false},
		{[]int{0}, []int{1}, true}, // as many nodes: the lower mask
		{[]int{1}, []int{0}, false},
		{[]int{0, 1}, []int{0, 1}, false},
	} {
		a, _ := New(tc.a...)
		b, _ := New(tc.b...)
		if got := a.IsNarrowerThan(b); got != tc.want {
			t.Errorf("%v.IsNarrowerThan(%v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestIterate(t *testing.T) {
	var got []string
	Iterate([]int{0, 1, 2}, func(m Mask) { got = append(got, m.String()) })
	want := []string{"01", "10", "100", "11", "0101", "0110", "0111"}
	if !slices.Equal(got, want) {
		t.Errorf("Iterate = %v, want %v", got, want)
	}
}
