package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	internalapi "k8s.io/cri-api/pkg/apis"
)

// CadvisorFamilies are the cadvisor families the dashboards and
// kube-prometheus rules read (issue 21's list, and the rest cadvisor serves
// for a kubelet's containers): what /metrics/cadvisor is checked for.
var CadvisorFamilies = []string{
	"container_cpu_usage_seconds_total", "container_cpu_user_seconds_total", "container_cpu_system_seconds_total",
	"container_cpu_cfs_periods_total", "container_cpu_cfs_throttled_periods_total", "container_cpu_cfs_throttled_seconds_total",
	"container_memory_working_set_bytes", "container_memory_rss", "container_memory_cache", "container_memory_usage_bytes",
	"container_memory_max_usage_bytes", "container_memory_mapped_file", "container_memory_swap", "container_memory_failcnt",
	"container_memory_failures_total", "container_oom_events_total",
	"container_fs_usage_bytes", "container_fs_limit_bytes", "container_fs_inodes_total", "container_fs_inodes_free",
	"container_fs_reads_bytes_total", "container_fs_writes_bytes_total", "container_fs_reads_total", "container_fs_writes_total",
	"container_network_receive_bytes_total", "container_network_transmit_bytes_total",
	"container_network_receive_packets_total", "container_network_transmit_packets_total",
	"container_network_receive_errors_total", "container_network_transmit_errors_total",
	"container_network_receive_packets_dropped_total", "container_network_transmit_packets_dropped_total",
	"container_spec_memory_limit_bytes", "container_spec_memory_reservation_limit_bytes", "container_spec_memory_swap_limit_bytes",
	"container_spec_cpu_shares", "container_spec_cpu_quota", "container_spec_cpu_period",
	"container_processes", "container_threads", "container_threads_max", "container_start_time_seconds", "container_last_seen",
	"container_scrape_error",
	"machine_cpu_cores", "machine_cpu_physical_cores", "machine_cpu_sockets", "machine_memory_bytes", "machine_scrape_error",
}

// CgroupOf is the host path of a container's cgroup in the cgroup v1
// controller named (cpuacct, memory, blkio), from its main process's
// /proc/<pid>/cgroup.
func CgroupOf(ctx context.Context, rt internalapi.RuntimeService, id, controller string) (string, error) {
	st, err := rt.ContainerStatus(ctx, id, true)
	if err != nil {
		return "", err
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.Pid == 0 {
		return "", fmt.Errorf("container %s pid: %v", id, err)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", info.Pid))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (parts[1] == controller || strings.Contains(","+parts[1]+",", ","+controller+",")) {
			m, _ := filepath.Glob("/sys/fs/cgroup/*" + controller + "*")
			for _, mnt := range m {
				if p := filepath.Join(mnt, parts[2]); exists(p) {
					return p, nil
				}
			}
		}
	}
	return "", fmt.Errorf("no %s cgroup for container %s:\n%s", controller, id, data)
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
