package kuberuntime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

func TestCgroupDriverFromRuntime(t *testing.T) {
	linux := func(d runtimeapi.CgroupDriver) *runtimeapi.RuntimeConfigResponse {
		return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: d}}
	}
	for _, tt := range []struct {
		name            string
		configured      string
		resp            *runtimeapi.RuntimeConfigResponse
		err             error
		want            string
		wantUnsupported bool
		wantErr         string
	}{
		{name: "runtime's systemd wins over configured cgroupfs", configured: "cgroupfs", resp: linux(runtimeapi.CgroupDriver_SYSTEMD), want: "systemd"},
		{name: "runtime's cgroupfs wins over configured systemd", configured: "systemd", resp: linux(runtimeapi.CgroupDriver_CGROUPFS), want: "cgroupfs"},
		{name: "no Linux configuration keeps the configured", configured: "cgroupfs", resp: &runtimeapi.RuntimeConfigResponse{}, want: "cgroupfs"},
		{name: "Unimplemented falls back and loses support", configured: "systemd", err: status.Error(codes.Unimplemented, "unknown method RuntimeConfig"),
			want: "systemd", wantUnsupported: true},
		{name: "another error is an error", configured: "systemd", err: status.Error(codes.Unavailable, "runtime unavailable"), want: "systemd", wantErr: "runtime unavailable"},
		{name: "unknown driver is an error", configured: "systemd", resp: linux(runtimeapi.CgroupDriver(100)), want: "systemd", wantErr: "unknown cgroup driver 100"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, unsupported, err := CgroupDriverFromRuntime(tt.configured, tt.resp, tt.err)
			if got != tt.want || unsupported != tt.wantUnsupported {
				t.Errorf("got %q unsupported=%v, want %q unsupported=%v", got, unsupported, tt.want, tt.wantUnsupported)
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// CgroupDriver asks 3 times, 2 s apart, while the runtime fails, and once
// when it does not implement RuntimeConfig.
func TestCgroupDriverRetries(t *testing.T) {
	for _, tt := range []struct {
		name      string
		errs      []error
		wantCalls int
		want      string
		wantErr   bool
	}{
		{name: "answers at once", wantCalls: 1, want: "systemd"},
		{name: "Unimplemented is not retried", errs: []error{status.Error(codes.Unimplemented, "no")}, wantCalls: 1, want: "cgroupfs"},
		{name: "a transient error is retried", errs: []error{status.Error(codes.Unavailable, "starting")}, wantCalls: 2, want: "systemd"},
		{name: "three failures fail", errs: []error{errors.New("a"), errors.New("b"), errors.New("c")}, wantCalls: 3, want: "cgroupfs", wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rs := critest.NewFakeRuntimeService()
				rs.FakeLinuxConfiguration = &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_SYSTEMD}
				for _, err := range tt.errs {
					rs.InjectError("RuntimeConfig", err)
				}
				got, _, err := CgroupDriver(context.Background(), rs, nil, "cgroupfs")
				if got != tt.want || (err != nil) != tt.wantErr {
					t.Errorf("got %q, %v; want %q (error %v)", got, err, tt.want, tt.wantErr)
				}
				if calls := len(rs.GetCalls()); calls != tt.wantCalls {
					t.Errorf("%d calls, want %d", calls, tt.wantCalls)
				}
			})
		})
	}
}
