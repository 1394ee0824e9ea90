package cgroups

import "testing"

func TestParseProcCgroup(t *testing.T) {
	hybrid := "12:memory:/system.slice/nodelet.service\n11:cpu,cpuacct:/system.slice/nodelet.service\n1:name=systemd:/system.slice/nodelet.service\n0::/system.slice/nodelet.service\n"
	for _, tc := range []struct {
		name, content string
		v2            bool
		want          string
		wantErr       bool
	}{
		{name: "v2", content: "0::/kubelet.slice\n", v2: true, want: "/kubelet.slice"},
		{name: "v1: the memory controller", content: hybrid, want: "/system.slice/nodelet.service"},
		{name: "v1 with memory co-mounted", content: "5:cpu,memory:/x\n", want: "/x"},
		{name: "v2 reading a v1-only host", content: "12:memory:/a\n", v2: true, wantErr: true},
		{name: "v1 without memory", content: "0::/a\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcCgroup(tc.content, tc.v2)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("got %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
