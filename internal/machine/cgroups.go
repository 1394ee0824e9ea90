package machine

import (
	"os"
	"path/filepath"
	"strings"
)

// Cgroups is how the machine's cgroups are mounted.
type Cgroups struct {
	// Mount is where the hierarchies are mounted (/sys/fs/cgroup); not to
	// be confused with the kubelet's cgroupRoot, the cgroup pods go under.
	Mount string
	// V2 is the unified hierarchy mounted at Mount.
	V2 bool
	// Hierarchies are the directories a cgroup is made in: Mount itself on
	// v2; on v1 every mounted hierarchy (each directory of Mount with a
	// cgroup.procs, symlinks resolved and co-mounts listed once), the
	// unified one of a hybrid setup included, as runc creates containers'
	// cgroups in all. None when nothing is mounted there.
	Hierarchies []string
}

// ReadCgroups looks at what is mounted at mount.
func ReadCgroups(mount string) Cgroups {
	c := Cgroups{Mount: mount}
	if exists(filepath.Join(mount, "cgroup.controllers")) {
		c.V2 = true
		c.Hierarchies = []string{mount}
		return c
	}
	entries, err := os.ReadDir(mount)
	if err != nil {
		return c
	}
	seen := map[string]bool{}
	for _, e := range entries {
		real, err := filepath.EvalSymlinks(filepath.Join(mount, e.Name()))
		if err != nil || seen[real] || !exists(filepath.Join(real, "cgroup.procs")) {
			continue
		}
		seen[real] = true
		c.Hierarchies = append(c.Hierarchies, real)
	}
	return c
}

// Version is "v2" or "v1", for logs.
func (c Cgroups) Version() string {
	if c.V2 {
		return "v2"
	}
	return "v1"
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Dir is the directory of cgroup name ("/kubepods", absolute in the
// hierarchy) for a v1 controller ("memory"): Mount/controller/name on v1,
// Mount/name on v2 (the controller is ignored).
func (c Cgroups) Dir(controller, name string) string {
	rel := filepath.FromSlash(strings.TrimPrefix(name, "/"))
	if c.V2 {
		return filepath.Join(c.Mount, rel)
	}
	return filepath.Join(c.Mount, controller, rel)
}
