package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Manager prepares pod volumes under a pods directory, through the volume
// plugin registered for each kind of volume source.
type Manager struct {
	podsDir string
	getter  Getter
	cfg     ManagerConfig

	mu      sync.Mutex
	plugins map[string]Plugin // by source kind
	byName  map[string]Plugin // by directory name
	set     map[volumeKey]bool
	states  map[volumeKey]State
}

// State is what the last set-up of a pod's volume did, for nodelet
// describe: the volume's host path and when it was last set up, or the
// error of the last try (Path and SetUpAt then keep the last success, if
// any).
type State struct {
	Path    string
	SetUpAt time.Time
	Err     string
	ErrAt   time.Time
}

type volumeKey struct {
	uid  types.UID
	name string
}

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	// PodsDir is <root-dir>/pods, where each pod's volumes go.
	PodsDir string
	// Getter reads the API objects that configMap, secret and projected
	// volumes need; nil in standalone mode.
	Getter Getter
	// Allocatable is the node's allocatable: a downwardAPI resourceFieldRef
	// reports it for a limit the container does not set. nil: none.
	Allocatable func() v1.ResourceList
	// PodCertificates give podCertificate projected sources their key and
	// certificate chain (podcertificate.Manager); nil: such a source fails
	// the mount (standalone mode, or the PodCertificateRequest gate off).
	PodCertificates PodCertificates
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
}

// PodCertificates give a podCertificate source its credentials, as
// upstream's podcertificate.Manager.
type PodCertificates interface {
	GetPodCertificateCredentialBundle(ctx context.Context, namespace, podName, podUID, volumeName string, sourceIndex int) (privateKey, certificateChain []byte, err error)
}

// New returns a Manager for cfg with the built-in volume plugins. It fails
// when cfg has no PodsDir.
func New(cfg ManagerConfig) (*Manager, error) {
	if cfg.PodsDir == "" {
		return nil, errors.New("volumes: ManagerConfig.PodsDir is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	m := &Manager{
		podsDir: cfg.PodsDir, getter: cfg.Getter, cfg: cfg,
		plugins: map[string]Plugin{}, byName: map[string]Plugin{},
		set: map[volumeKey]bool{}, states: map[volumeKey]State{},
	}
	m.registerBuiltins()
	return m, nil
}

// PodDir is the directory of the pod with uid.
func (m *Manager) PodDir(uid types.UID) string { return filepath.Join(m.podsDir, string(uid)) }

// Setup prepares every volume of pod and returns each volume's host path by
// volume name. It is idempotent; projected contents are rewritten (atomically)
// when they changed.
func (m *Manager) Setup(ctx context.Context, pod *v1.Pod) (map[string]string, error) {
	paths := make(map[string]string, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		p, err := m.setup(ctx, pod, v)
		m.record(volumeKey{pod.UID, v.Name}, p, err)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		paths[v.Name] = p
	}
	return paths, nil
}

func (m *Manager) setup(ctx context.Context, pod *v1.Pod, v *v1.Volume) (string, error) {
	kind := Kind(v)
	if kind == "" {
		return "", errors.New("the volume has no source")
	}
	p := m.plugin(kind)
	if p == nil {
		return "", fmt.Errorf("volume type %s is not supported by this node: no volume plugin for it", kind)
	}
	if !p.CanSupport(v) {
		return "", fmt.Errorf("no volume plugin of this node supports this %s volume%s", kind, kindDetail(v))
	}
	key := volumeKey{pod.UID, v.Name}
	m.mu.Lock()
	first := !m.set[key]
	m.mu.Unlock()
	path, err := p.SetUp(ctx, &Volume{
		Pod: pod, Spec: v, First: first,
		Dir: filepath.Join(m.PodDir(pod.UID), "volumes", p.Name(), v.Name),
	})
	if err != nil {
		return "", err
	}
	if first {
		m.mu.Lock()
		m.set[key] = true
		m.mu.Unlock()
	}
	return path, nil
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

// Teardown removes the pod's directory: each volume is torn down by the
// plugin its directory belongs to (unmounting it), then the directory goes
// with its emptyDir volumes and container files. It refuses to cross a
// mount point left behind, so a volume still mounted is reported instead of
// having its contents deleted. It works from the directory alone: for pods
// nodelet no longer knows (deleted while it was down) too.
func (m *Manager) Teardown(uid types.UID) error {
	dir := m.PodDir(uid)
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		m.forget(uid)
		return nil
	}
	ctx := context.Background()
	var errs []error
	pluginDirs, _ := os.ReadDir(filepath.Join(dir, "volumes"))
	for _, pd := range pluginDirs {
		p := m.pluginNamed(pd.Name())
		if p == nil || !pd.IsDir() {
			continue // unmounted below like any mount
		}
		vols, _ := os.ReadDir(filepath.Join(dir, "volumes", pd.Name()))
		for _, vd := range vols {
			if err := p.TearDown(ctx, filepath.Join(dir, "volumes", pd.Name(), vd.Name())); err != nil {
				errs = append(errs, fmt.Errorf("tear down volume %s (%s): %w", vd.Name(), pd.Name(), err))
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := unmountUnder(dir); err != nil {
		return err
	}
	if err := checkNoMounts(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	m.forget(uid)
	return nil
}

// record keeps the outcome of a volume's set-up.
func (m *Manager) record(key volumeKey, path string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.states[key]
	if err != nil {
		st.Err, st.ErrAt = err.Error(), m.cfg.Clock.Now()
	} else {
		st = State{Path: path, SetUpAt: m.cfg.Clock.Now()}
	}
	m.states[key] = st
}

// States is the last set-up outcome of each of the pod's volumes tried
// since nodelet started, by volume name; a volume not in it was not
// reached yet (the set-up stops at the first volume that fails).
func (m *Manager) States(uid types.UID) map[string]State {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]State{}
	for k, st := range m.states {
		if k.uid == uid {
			out[k.name] = st
		}
	}
	return out
}

// forget drops what the Manager remembers of a pod.
func (m *Manager) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.set {
		if k.uid == uid {
			delete(m.set, k)
		}
	}
	for k := range m.states {
		if k.uid == uid {
			delete(m.states, k)
		}
	}
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
