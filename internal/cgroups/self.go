package cgroups

import (
	"fmt"
	"os"
	"strings"
)

// ProcessCgroup is pid's cgroup (0: this process) as /proc/PID/cgroup
// names it: the unified hierarchy's on v2, the memory controller's on v1 —
// what upstream reports as the kubelet's system container when
// kubeletCgroups is not set.
func ProcessCgroup(pid int, v2 bool) (string, error) {
	p := "/proc/self/cgroup"
	if pid > 0 {
		p = fmt.Sprintf("/proc/%d/cgroup", pid)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	return parseProcCgroup(string(data), v2)
}

// parseProcCgroup finds the cgroup in /proc/PID/cgroup's content.
func parseProcCgroup(content string, v2 bool) (string, error) {
	for _, line := range strings.Split(content, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if v2 && parts[0] == "0" && parts[1] == "" {
			return parts[2], nil
		}
		if !v2 {
			for _, c := range strings.Split(parts[1], ",") {
				if c == "memory" {
					return parts[2], nil
				}
			}
		}
	}
	want := "the memory controller's line"
	if v2 {
		want = "the unified hierarchy's line (0::)"
	}
	return "", fmt.Errorf("no cgroup in /proc/PID/cgroup: %s missing", want)
}

// KubeletCgroup is the cgroup reported as the kubelet's system container:
// kubeletCgroups when set (the manager moves nodelet into it at start),
// else the cgroup this process runs in, as upstream.
func KubeletCgroup(kubeletCgroups string, v2 bool) (string, error) {
	if kubeletCgroups != "" {
		return kubeletCgroups, nil
	}
	return ProcessCgroup(0, v2)
}
