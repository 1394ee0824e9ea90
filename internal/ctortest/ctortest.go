package ctortest

import (
	"strings"
	"testing"

	"k8s.io/utils/clock"
)

// Case is one Config given to a constructor.
type Case[C any] struct {
	Name   string
	Config C
	// WantErr is a part of the error New must return; "" when New must
	// succeed.
	WantErr string
}

// Run calls newFn with each case's Config in a subtest of its own: a case
// with WantErr must fail with an error containing it; the others must
// succeed, and check (if not nil) looks at what New returned.
func Run[C, T any](t *testing.T, newFn func(C) (T, error), cases []Case[C], check func(t *testing.T, v T)) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			v, err := newFn(tc.Config)
			if tc.WantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.WantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.WantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if check != nil {
				check(t, v)
			}
		})
	}
}

// RealClock fails t unless c is the real clock: what New gives a Config
// without one.
func RealClock(t testing.TB, c any) {
	t.Helper()
	if _, ok := c.(clock.RealClock); !ok {
		t.Errorf("clock %T, want the real clock", c)
	}
}
