package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Manager prepares pod volumes under a pods directory.
type Manager struct {
	podsDir string
	getter  Getter
}

// NewManager returns a Manager for <root-dir>/pods. getter reads the API
// objects that configMap, secret and projected volumes need; nil in
// standalone mode.
func NewManager(podsDir string, getter Getter) *Manager {
	return &Manager{podsDir: podsDir, getter: getter}
}

// PodDir is the directory of the pod with uid.
func (m *Manager) PodDir(uid types.UID) string { return filepath.Join(m.podsDir, string(uid)) }

// Setup prepares every volume of pod and returns each volume's host path by
// volume name. It is idempotent; projected contents are rewritten (atomically)
// when they changed.
func (m *Manager) Setup(ctx context.Context, pod *v1.Pod) (map[string]string, error) {
	paths := make(map[string]string, len(pod.Spec.Volumes))
	for _, v := range pod.Spec.Volumes {
		p, err := m.setup(ctx, pod, &v)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		paths[v.Name] = p
	}
	return paths, nil
}

func (m *Manager) setup(ctx context.Context, pod *v1.Pod, v *v1.Volume) (string, error) {
	switch {
	case v.ConfigMap != nil, v.Secret != nil, v.DownwardAPI != nil, v.Projected != nil:
		files, err := m.project(ctx, pod, v)
		if err != nil {
			return "", err
		}
		dir := filepath.Join(m.PodDir(pod.UID), "volumes", pluginDir(v), v.Name)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return "", err
		}
		// Secrets and projected volumes (service account tokens) live in
		// memory, never on disk, as upstream.
		if v.Secret != nil || v.Projected != nil {
			if err := ensureTmpfs(dir, ""); err != nil {
				return "", err
			}
		}
		return dir, writeAtomic(dir, files)
	case v.EmptyDir != nil:
		dir := filepath.Join(m.PodDir(pod.UID), "volumes", pluginDir(v), v.Name)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return "", err
		}
		switch v.EmptyDir.Medium {
		case v1.StorageMediumDefault:
		case v1.StorageMediumMemory:
			// A tmpfs, as large as sizeLimit (the kernel's default, half
			// the memory, without one).
			opts := ""
			if l := v.EmptyDir.SizeLimit; l != nil && l.Value() > 0 {
				opts = fmt.Sprintf("size=%d", l.Value())
			}
			if err := ensureTmpfs(dir, opts); err != nil {
				return "", err
			}
		default:
			return "", fmt.Errorf("emptyDir medium %q is not supported yet", v.EmptyDir.Medium)
		}
		// As upstream: world-writable, so any container user can use it.
		return dir, os.Chmod(dir, 0o777)
	case v.HostPath != nil:
		return v.HostPath.Path, checkHostPath(v.HostPath)
	default:
		return "", fmt.Errorf("volume type %s is not supported yet", volumeType(v))
	}
}

// pluginDir names a volume's directory as upstream's plugins do.
func pluginDir(v *v1.Volume) string {
	switch {
	case v.Secret != nil:
		return "kubernetes.io~secret"
	case v.DownwardAPI != nil:
		return "kubernetes.io~downward-api"
	case v.Projected != nil:
		return "kubernetes.io~projected"
	case v.ConfigMap != nil:
		return "kubernetes.io~configmap"
	case v.EmptyDir != nil:
		return "kubernetes.io~empty-dir"
	}
	return "other"
}

func checkHostPath(h *v1.HostPathVolumeSource) error {
	if !filepath.IsAbs(h.Path) {
		return fmt.Errorf("hostPath %q must be absolute", h.Path)
	}
	typ := v1.HostPathUnset
	if h.Type != nil {
		typ = *h.Type
	}
	switch typ {
	case v1.HostPathDirectoryOrCreate:
		return os.MkdirAll(h.Path, 0o755)
	case v1.HostPathFileOrCreate:
		if err := os.MkdirAll(filepath.Dir(h.Path), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(h.Path, os.O_CREATE|os.O_RDONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	case v1.HostPathUnset:
		return nil
	}
	fi, err := os.Stat(h.Path)
	if err != nil {
		return fmt.Errorf("hostPath type check failed: %w", err)
	}
	mode := fi.Mode()
	ok := false
	switch typ {
	case v1.HostPathDirectory:
		ok = mode.IsDir()
	case v1.HostPathFile:
		ok = mode.IsRegular()
	case v1.HostPathSocket:
		ok = mode&os.ModeSocket != 0
	case v1.HostPathCharDev:
		ok = mode&os.ModeCharDevice != 0
	case v1.HostPathBlockDev:
		ok = mode&os.ModeDevice != 0 && mode&os.ModeCharDevice == 0
	default:
		return fmt.Errorf("unknown hostPath type %q", typ)
	}
	if !ok {
		return fmt.Errorf("hostPath type check failed: %s is not a %s", h.Path, typ)
	}
	return nil
}

// Teardown removes the pod's directory: its emptyDir volumes and container
// files. It refuses to cross a mount point, so a mounted volume left behind
// is reported instead of having its contents deleted.
func (m *Manager) Teardown(uid types.UID) error {
	dir := m.PodDir(uid)
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := unmountTmpfsUnder(dir); err != nil {
		return err
	}
	if err := checkNoMounts(dir); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// PodUIDs lists the pods that have a directory.
func (m *Manager) PodUIDs() ([]types.UID, error) {
	entries, err := os.ReadDir(m.podsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	uids := make([]types.UID, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			uids = append(uids, types.UID(e.Name()))
		}
	}
	return uids, nil
}

func checkNoMounts(dir string) error {
	var root syscall.Stat_t
	if err := syscall.Lstat(dir, &root); err != nil {
		return err
	}
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) == nil && st.Dev != root.Dev {
			return fmt.Errorf("%s is still a mount point; not removing it", p)
		}
		return nil
	})
}

func volumeType(v *v1.Volume) string {
	src := v.VolumeSource
	for name, set := range map[string]bool{
		"persistentVolumeClaim": src.PersistentVolumeClaim != nil, "configMap": src.ConfigMap != nil,
		"secret": src.Secret != nil, "downwardAPI": src.DownwardAPI != nil, "projected": src.Projected != nil,
		"csi": src.CSI != nil, "nfs": src.NFS != nil, "iscsi": src.ISCSI != nil, "ephemeral": src.Ephemeral != nil,
		"image": src.Image != nil,
	} {
		if set {
			return name
		}
	}
	return strings.TrimSpace("(other)")
}
