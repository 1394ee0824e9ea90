package nodestatus

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// machine is what the node is made of, read from /proc, /sys and statfs.
type machine struct {
	cpus         int
	memoryBytes  int64
	storageBytes int64
	machineID    string
	systemUUID   string
	bootID       string
	kernel       string
	osImage      string
}

func readMachine(rootDir string) machine {
	m := machine{cpus: runtime.NumCPU()}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) >= 2 && fields[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(fields[1], 10, 64)
				m.memoryBytes = kb * 1024
			}
		}
		f.Close()
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(rootDir, &st); err == nil {
		m.storageBytes = int64(st.Blocks) * st.Bsize
	}
	m.machineID = readTrim("/etc/machine-id", "/var/lib/dbus/machine-id")
	m.systemUUID = strings.ToLower(readTrim("/sys/class/dmi/id/product_uuid"))
	if m.systemUUID == "" {
		m.systemUUID = m.machineID
	}
	m.bootID = readTrim("/proc/sys/kernel/random/boot_id")
	m.kernel = readTrim("/proc/sys/kernel/osrelease")
	m.osImage = "Linux"
	if data, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				m.osImage = strings.Trim(v, `"`)
			}
		}
	}
	return m
}

func readTrim(paths ...string) string {
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil {
			if s := strings.TrimSpace(string(data)); s != "" {
				return s
			}
		}
	}
	return ""
}

// capacity is the node's capacity as upstream reports it.
func (m machine) capacity(maxPods int32) v1.ResourceList {
	return v1.ResourceList{
		v1.ResourceCPU:              *resource.NewQuantity(int64(m.cpus), resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(m.memoryBytes, resource.BinarySI),
		v1.ResourcePods:             *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
		v1.ResourceEphemeralStorage: *resource.NewQuantity(m.storageBytes, resource.BinarySI),
		"hugepages-1Gi":             *resource.NewQuantity(0, resource.BinarySI),
		"hugepages-2Mi":             *resource.NewQuantity(0, resource.BinarySI),
	}
}
