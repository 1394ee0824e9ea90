package memorymanager

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// NUMANode is a NUMA node's memory as cadvisor reports it to upstream's
// memory manager: MemTotal of the node's meminfo, and its huge pages of
// every size the kernel offers (0 pages included).
type NUMANode struct {
	ID int
	// Memory is in bytes.
	Memory    uint64
	HugePages []HugePages
}

// HugePages are the pages of one size a NUMA node holds.
type HugePages struct {
	// PageSize is in KiB, as sysfs names it.
	PageSize uint64
	Pages    uint64
}

// Discover reads the NUMA nodes' memory under root (sysfs): each
// /sys/devices/system/node/nodeN. A machine without them is one node 0
// with /proc/meminfo's MemTotal and /sys/kernel/mm/hugepages, as
// cadvisor.
func Discover(root string) ([]NUMANode, error) {
	dirs, _ := filepath.Glob(filepath.Join(root, "sys/devices/system/node/node[0-9]*"))
	var out []NUMANode
	for _, dir := range dirs {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "node"))
		if err != nil {
			continue
		}
		mem, err := memTotal(filepath.Join(dir, "meminfo"))
		if err != nil {
			return nil, err
		}
		hp, err := hugePages(filepath.Join(dir, "hugepages"))
		if err != nil {
			return nil, err
		}
		out = append(out, NUMANode{ID: id, Memory: mem, HugePages: hp})
	}
	if len(out) == 0 {
		mem, err := memTotal(filepath.Join(root, "proc/meminfo"))
		if err != nil {
			return nil, err
		}
		hp, err := hugePages(filepath.Join(root, "sys/kernel/mm/hugepages"))
		if err != nil {
			return nil, err
		}
		out = append(out, NUMANode{ID: 0, Memory: mem, HugePages: hp})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// memTotal is MemTotal of a meminfo file ("MemTotal: N kB" or a node's
// "Node 0 MemTotal: N kB"), in bytes.
func memTotal(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, fl := range fields {
			if fl == "MemTotal:" && i+1 < len(fields) {
				kb, err := strconv.ParseUint(fields[i+1], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("%s: %w", path, err)
				}
				return kb * 1024, nil
			}
		}
	}
	return 0, fmt.Errorf("%s: no MemTotal", path)
}

// hugePages are the hugepages-<size>kB directories of dir with their
// nr_hugepages (none when dir does not exist).
func hugePages(dir string) ([]HugePages, error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []HugePages
	for _, e := range ents {
		size, ok := strings.CutPrefix(e.Name(), "hugepages-")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(size, "kB"), 10, 64)
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name(), "nr_hugepages"))
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		out = append(out, HugePages{PageSize: kb, Pages: n})
	}
	return out, nil
}
