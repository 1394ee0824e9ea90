package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/internal/cgroups"
)

// registerBuiltins registers the volume kinds nodelet provides itself.
func (m *Manager) registerBuiltins() {
	m.Register("emptyDir", &emptyDirPlugin{m: m})
	m.Register("hostPath", hostPathPlugin{})
	m.Register("configMap", &projectionPlugin{m: m, name: "kubernetes.io~configmap"})
	m.Register("downwardAPI", &projectionPlugin{m: m, name: "kubernetes.io~downward-api"})
	// Secrets and projected volumes (service account tokens) live in
	// memory, never on disk, as upstream.
	m.Register("secret", &projectionPlugin{m: m, name: "kubernetes.io~secret", tmpfs: true})
	m.Register("projected", &projectionPlugin{m: m, name: "kubernetes.io~projected", tmpfs: true})
	m.Register("image", imagePlugin{})
}

// imagePlugin: an OCI image or artifact mounted read-only by the runtime
// (CRI Mount.image). The node has nothing to prepare: the image is pulled
// with the pod's credentials when a container mounting it starts
// (kuberuntime), as upstream's image volume plugin, which does nothing
// either. Its host path is empty.
type imagePlugin struct{}

func (imagePlugin) Name() string                                   { return "kubernetes.io~image" }
func (imagePlugin) CanSupport(spec *v1.Volume) bool                { return spec.Image != nil }
func (imagePlugin) SetUp(context.Context, *Volume) (string, error) { return "", nil }
func (imagePlugin) TearDown(context.Context, string) error         { return nil }

// emptyDirPlugin: a directory of the pod on the node's disk, a tmpfs
// sized by sizeLimit (medium Memory), or a hugetlbfs of the pod's huge page
// size (medium HugePages, HugePages-<size>).
type emptyDirPlugin struct{ m *Manager }

func (*emptyDirPlugin) Name() string                    { return "kubernetes.io~empty-dir" }
func (*emptyDirPlugin) CanSupport(spec *v1.Volume) bool { return spec.EmptyDir != nil }

func (p *emptyDirPlugin) SetUp(ctx context.Context, vol *Volume) (string, error) {
	dir, src := vol.Dir, vol.Spec.EmptyDir
	_, err := os.Lstat(dir)
	fresh := errors.Is(err, os.ErrNotExist)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	switch src.Medium {
	case v1.StorageMediumDefault:
	case v1.StorageMediumMemory:
		// A tmpfs of the kernel's default mode 1777, as upstream (the
		// sticky bit stays: only the permission bits are set below),
		// sized as upstream's calculateEmptyDirMemorySize.
		var allocatable *resource.Quantity
		if p.m.cfg.Allocatable != nil {
			if q, ok := p.m.cfg.Allocatable()[v1.ResourceMemory]; ok {
				allocatable = &q
			}
		}
		opts := ""
		if size := memoryMediumSize(allocatable, vol.Pod, src.SizeLimit); size > 0 {
			opts = fmt.Sprintf("size=%d", size)
		}
		mounted, err := ensureTmpfs(dir, opts)
		if err != nil {
			return "", err
		}
		fresh = fresh || mounted
	case v1.StorageMediumHugePages:
		mounted, err := ensureHugetlbfs(dir, src.Medium, vol.Pod)
		if err != nil {
			return "", err
		}
		fresh = fresh || mounted
	default:
		if !strings.HasPrefix(string(src.Medium), string(v1.StorageMediumHugePagesPrefix)) {
			return "", fmt.Errorf("emptyDir medium %q is not supported", src.Medium)
		}
		mounted, err := ensureHugetlbfs(dir, src.Medium, vol.Pod)
		if err != nil {
			return "", err
		}
		fresh = fresh || mounted
	}
	if fresh {
		// As upstream: world-writable, so any container user can use it.
		// Only when created: what the pod did to it since stays.
		info, err := os.Stat(dir)
		if err != nil {
			return "", err
		}
		if info.Mode().Perm() != 0o777 {
			if err := os.Chmod(dir, 0o777); err != nil {
				return "", err
			}
		}
	}
	if vol.First || fresh {
		if err := SetVolumeOwnership(ctx, dir, vol.FSGroup(), vol.FSGroupChangePolicy(), false); err != nil {
			return "", fmt.Errorf("set the fsGroup: %w", err)
		}
	}
	return dir, nil
}

// pageSizeOption is upstream's getPageSizeMountOption: the hugetlbfs
// pagesize of a HugePages medium, from the pod's huge pages requests (one
// size for HugePages; HugePages-<size> needs a request of that size).
func pageSizeOption(medium v1.StorageMedium, pod *v1.Pod) (string, error) {
	var want *resource.Quantity
	if medium != v1.StorageMediumHugePages {
		q, err := resource.ParseQuantity(strings.TrimPrefix(string(medium), string(v1.StorageMediumHugePagesPrefix)))
		if err != nil {
			return "", fmt.Errorf("unable to parse hugepage size from medium %q: %w", medium, err)
		}
		want = &q
	}
	var lists []v1.ResourceList
	if pod.Spec.Resources != nil {
		lists = append(lists, pod.Spec.Resources.Requests)
	}
	for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			lists = append(lists, cs[i].Resources.Requests)
		}
	}
	var found *resource.Quantity
	for _, l := range lists {
		for name := range l {
			size, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
			if !ok {
				continue
			}
			q, err := resource.ParseQuantity(size)
			if err != nil {
				return "", err
			}
			switch {
			case want == nil && found != nil && found.Cmp(q) != 0:
				return "", fmt.Errorf("medium: %s can't be used if container requests multiple huge page sizes", medium)
			case want == nil || want.Cmp(q) == 0:
				found = &q
			}
		}
	}
	if found == nil {
		return "", fmt.Errorf("medium %s: hugePages storage requested, but there is no resource request for huge pages", medium)
	}
	return "pagesize=" + found.String(), nil
}

// memoryMediumSize is the size in bytes of a memory-backed emptyDir, as
// upstream's calculateEmptyDirMemorySize: the node's allocatable memory,
// else the pod's memory limit when it has one (all its containers, or the
// pod itself, declare one) and it is smaller, else the volume's sizeLimit
// when set and smaller still. So a sizeLimit of 1Ti never makes a tmpfs
// larger than the pod may use. 0: no bound known (the kernel's default,
// half the memory).
func memoryMediumSize(allocatable *resource.Quantity, pod *v1.Pod, sizeLimit *resource.Quantity) int64 {
	var size int64
	if allocatable != nil {
		size = allocatable.Value()
	}
	smaller := func(v int64) bool { return v > 0 && (size == 0 || v <= size) }
	if rc := cgroups.ResourceConfigForPod(pod, false, 100000); rc != nil && rc.Memory != nil && smaller(*rc.Memory) {
		size = *rc.Memory
	}
	if sizeLimit != nil && smaller(sizeLimit.Value()) {
		size = sizeLimit.Value()
	}
	return size
}

func (*emptyDirPlugin) TearDown(_ context.Context, dir string) error { return unmountUnder(dir) }

// hostPathPlugin: a path of the node, checked against its type (created for
// the *OrCreate types). It has no directory of its own and nothing to tear
// down: its contents belong to the node. fsGroup does not apply, as upstream.
type hostPathPlugin struct{}

func (hostPathPlugin) Name() string                    { return "kubernetes.io~host-path" }
func (hostPathPlugin) CanSupport(spec *v1.Volume) bool { return spec.HostPath != nil }
func (hostPathPlugin) SetUp(_ context.Context, vol *Volume) (string, error) {
	return vol.Spec.HostPath.Path, checkHostPath(vol.Spec.HostPath)
}
func (hostPathPlugin) TearDown(context.Context, string) error { return nil }

// projectionPlugin: configMap, secret, downwardAPI and projected volumes,
// whose files nodelet writes (atomically) from the API objects and the pod,
// on every sync, so that updates reach running pods.
type projectionPlugin struct {
	m     *Manager
	name  string
	tmpfs bool
}

func (p *projectionPlugin) Name() string { return p.name }
func (p *projectionPlugin) CanSupport(spec *v1.Volume) bool {
	return spec.ConfigMap != nil || spec.Secret != nil || spec.DownwardAPI != nil || spec.Projected != nil
}

func (p *projectionPlugin) SetUp(ctx context.Context, vol *Volume) (string, error) {
	files, err := p.m.project(ctx, vol.Pod, vol.Spec)
	if err != nil {
		return "", err
	}
	dir := vol.Dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if p.tmpfs {
		if _, err := ensureTmpfs(dir, "mode=0755"); err != nil {
			return "", err
		}
	}
	// With an fsGroup, as upstream's ownership walk after each write: the
	// group everywhere, files' modes | group read, directories | setgid.
	gid := -1
	rootMode := os.FileMode(0o755)
	if g := vol.FSGroup(); g != nil {
		gid = int(*g)
		rootMode |= os.ModeSetgid
		for k, f := range files {
			f.mode |= roMask
			files[k] = f
		}
	}
	if err := ensureRoot(dir, gid, rootMode); err != nil {
		return "", err
	}
	return dir, writeAtomic(dir, files, gid)
}

func (p *projectionPlugin) TearDown(_ context.Context, dir string) error {
	if p.tmpfs {
		return unmountUnder(dir)
	}
	return nil
}

// ensureRoot gives a volume's directory its mode and group (gid -1: leave
// it), touching it only when they differ.
func ensureRoot(dir string, gid int, mode os.FileMode) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st != nil && (gid < 0 || int(st.Gid) == gid) && fi.Mode()&(os.ModePerm|os.ModeSetgid) == mode {
		return nil
	}
	return own(dir, -1, gid, mode)
}
