package userns

import (
	"context"
	"errors"
	"os/exec"
	"os/user"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2/ktesting"
)

func TestValidateIDsPerPod(t *testing.T) {
	cases := []struct {
		v       *int64
		wantErr string
	}{
		{v: nil},
		{v: ptr[int64](65536)},
		{v: ptr[int64](1 << 20)},
		{v: ptr[int64](4294901760)},
		{v: ptr[int64](0), wantErr: "invalid configuration: userNamespaces.idsPerPod must not be less than 65536"},
		{v: ptr[int64](-65536), wantErr: "invalid configuration: userNamespaces.idsPerPod must not be less than 65536"},
		{v: ptr[int64](100000), wantErr: "invalid configuration: userNamespaces.idsPerPod must be a multiple of 65536"},
		{v: ptr[int64](1 << 32), wantErr: "invalid configuration: userNamespaces.idsPerPod must not be more than 4294967295"},
	}
	for _, tc := range cases {
		err := ValidateIDsPerPod(tc.v)
		if (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
			t.Errorf("ValidateIDsPerPod(%v): %v, want %q", tc.v, err, tc.wantErr)
		}
	}
}

func TestDefaultMappings(t *testing.T) {
	for _, tc := range []struct{ ids, first, length uint32 }{
		{65536, 65536, 4294901760},
		{1 << 20, 1 << 20, 4293918720},
	} {
		first, length := DefaultMappings(tc.ids)
		if first != tc.first || length != tc.length {
			t.Errorf("DefaultMappings(%d) = %d, %d; want %d, %d", tc.ids, first, length, tc.first, tc.length)
		}
	}
}

func TestParseGetSubIdsOutput(t *testing.T) {
	tests := []struct {
		name         string
		input        string
		wantFirstID  uint32
		wantRangeLen uint32
		wantErr      bool
	}{
		{name: "valid", input: "0: kubelet 65536 2147483648", wantFirstID: 65536, wantRangeLen: 2147483648},
		{name: "valid with newline", input: "0: kubelet 65536 2147483648\n", wantFirstID: 65536, wantRangeLen: 2147483648},
		{name: "multiple lines", input: "0: kubelet 1 2\n1: kubelet 3 4\n", wantErr: true},
		{name: "wrong format", input: "0: kubelet 65536", wantErr: true},
		{name: "non numeric 1", input: "0: kubelet Foo 65536", wantErr: true},
		{name: "non numeric 2", input: "0: kubelet 0 Bar", wantErr: true},
		{name: "overflow 1", input: "0: kubelet 4294967296 2147483648", wantErr: true},
		{name: "overflow 2", input: "0: kubelet 65536 4294967296", wantErr: true},
		{name: "negative value 1", input: "0: kubelet -1 2147483648", wantErr: true},
		{name: "negative value 2", input: "0: kubelet 65536 -1", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			first, n, err := parseGetSubIdsOutput(tc.input)
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if first != tc.wantFirstID || n != tc.wantRangeLen {
				t.Errorf("got (%d, %d), want (%d, %d)", first, n, tc.wantFirstID, tc.wantRangeLen)
			}
		})
	}
}

func TestKubeletMappings(t *testing.T) {
	const out = "0: kubelet 131072 6553600\n"
	userOK := func(string) error { return nil }
	noUser := func(name string) error { return user.UnknownUserError(name) }
	found := func(string) (string, error) { return "/usr/bin/getsubids", nil }
	run := func(uids, gids string, err error) func(context.Context, string, ...string) ([]byte, error) {
		return func(_ context.Context, name string, args ...string) ([]byte, error) {
			if name != "/usr/bin/getsubids" || args[len(args)-1] != "kubelet" {
				return nil, errors.New("unexpected command " + name + " " + strings.Join(args, " "))
			}
			if err != nil {
				return nil, err
			}
			if len(args) == 2 && args[0] == "-g" {
				return []byte(gids), nil
			}
			return []byte(uids), nil
		}
	}
	cases := []struct {
		name        string
		host        hostSubIDs
		first, n    uint32
		wantErr     string
		wantErrFull bool
	}{
		{name: "no kubelet user", host: hostSubIDs{lookupUser: noUser}, first: 65536, n: 4294901760},
		{name: "user lookup fails", host: hostSubIDs{lookupUser: func(string) error { return errors.New("nss down") }}, wantErr: "nss down"},
		{name: "getsubids not found", host: hostSubIDs{lookupUser: userOK, lookPath: func(f string) (string, error) {
			return "", &exec.Error{Name: f, Err: exec.ErrNotFound}
		}}, wantErr: `exec: "getsubids": executable file not found in $PATH`},
		{name: "from getsubids", host: hostSubIDs{lookupUser: userOK, lookPath: found, output: run(out, out, nil)}, first: 131072, n: 6553600},
		{name: "getsubids fails", host: hostSubIDs{lookupUser: userOK, lookPath: found, output: run("", "", errors.New("exit status 1"))},
			wantErr: `error retrieving additional uids for user "kubelet": exit status 1`},
		{name: "mismatch", host: hostSubIDs{lookupUser: userOK, lookPath: found, output: run(out, "0: kubelet 65536 65536\n", nil)},
			wantErr: `mismatched subuids and subgids for user "kubelet"`},
		{name: "no range", host: hostSubIDs{lookupUser: userOK, lookPath: found, output: run("", "", nil)},
			wantErr: `invalid line ""`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			first, n, err := kubeletMappings(ctx, 65536, tc.host)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if first != tc.first || n != tc.n {
				t.Errorf("got %d, %d; want %d, %d", first, n, tc.first, tc.n)
			}
		})
	}
}

func TestRuntimeHandlerSupportsUserNamespaces(t *testing.T) {
	handlers := []*runtimeapi.RuntimeHandler{
		{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: true}},
		{Name: "runc", Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: false}},
		{Name: "old"},
	}
	cases := []struct {
		handlers []*runtimeapi.RuntimeHandler
		name     string
		want     bool
		wantErr  string
	}{
		{handlers: nil, name: ""},
		{handlers: handlers, name: "", want: true},
		{handlers: handlers, name: "runc"},
		{handlers: handlers, name: "old"},
		{handlers: handlers, name: "kata", wantErr: `the handler "kata" is not known`},
	}
	for _, tc := range cases {
		got, err := RuntimeHandlerSupportsUserNamespaces(tc.handlers, tc.name)
		if got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
			t.Errorf("%q: %v, %v; want %v, %q", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestBitmap(t *testing.T) {
	b := newBitmap(130)
	b.intN = func(int) int { return 128 }
	for _, want := range []int{128, 129, 0, 1} {
		got, ok := b.allocateNext()
		if !ok || got != want {
			t.Fatalf("allocateNext = %d, %v; want %d", got, ok, want)
		}
	}
	if b.allocate(0) || !b.allocate(64) || b.allocate(130) || b.allocate(-1) {
		t.Fatal("allocate of a used, free or out-of-range block")
	}
	b.release(129)
	b.release(129)
	b.release(500)
	if b.has(129) || b.count != 4 || b.used() != 4 {
		t.Fatalf("count %d used %d", b.count, b.used())
	}
	for b.count < b.max {
		if _, ok := b.allocateNext(); !ok {
			t.Fatal("full too early")
		}
	}
	if _, ok := b.allocateNext(); ok {
		t.Fatal("allocated from a full bitmap")
	}
}
