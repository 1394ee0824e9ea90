package userns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// mapReInitializeThreshold is how many releases make the pod map be made
// anew, since Go maps never give memory back.
const mapReInitializeThreshold = 1000

// Config is what New needs.
type Config struct {
	// PodsDir is <root-dir>/pods: each pod's record is PodsDir/<uid>/userns,
	// and New reads those of the pod directories it finds. Required.
	PodsDir string
	// IDsPerPod is userNamespaces.idsPerPod, the length of each pod's
	// mappings: a multiple of 65536 up to 2^32-1 (ValidateIDsPerPod). nil:
	// DefaultIDsPerPod.
	IDsPerPod *int64
	// MaxPods is the kubelet's maxPods: the range must have a block for
	// each. Must not be negative.
	MaxPods int
	// KubeletMappings returns the range of IDs (first, length) the kubelet
	// may hand out, given idsPerPod. nil: GetKubeletMappings, upstream's
	// getsubids lookup for the user "kubelet" with DefaultMappings as the
	// fallback.
	KubeletMappings func(ctx context.Context, idsPerPod uint32) (firstID, length uint32, err error)
	// HandlerSupportsUserNamespaces tells whether the runtime handler
	// supports user namespaces (see RuntimeHandlerSupportsUserNamespaces).
	// Required.
	HandlerSupportsUserNamespaces func(handler string) (bool, error)
}

// Manager hands out pods' user namespaces; it is safe for concurrent use.
type Manager struct {
	cfg Config

	// off and len are the kubelet's range in blocks of userNsLength IDs:
	// block i of the bitmap is IDs [(off+i)*userNsLength, +userNsLength).
	off          int
	len          int
	userNsLength uint32

	// lock guards the fields below.
	lock    sync.Mutex
	used    *bitmap
	usedBy  map[types.UID]uint32 // pod UID to the first host ID of its block
	removed int
}

// New checks cfg and the kubelet's range against idsPerPod and maxPods as
// upstream's MakeUserNsManager does, then records the blocks of the pods
// that have a userns record in their directory under PodsDir.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.PodsDir == "" {
		return nil, errors.New("Config.PodsDir is required")
	}
	if cfg.HandlerSupportsUserNamespaces == nil {
		return nil, errors.New("Config.HandlerSupportsUserNamespaces is required")
	}
	if cfg.MaxPods < 0 {
		return nil, fmt.Errorf("Config.MaxPods %d must not be negative", cfg.MaxPods)
	}
	if err := ValidateIDsPerPod(cfg.IDsPerPod); err != nil {
		return nil, err
	}
	if cfg.KubeletMappings == nil {
		cfg.KubeletMappings = GetKubeletMappings
	}
	logger := klog.FromContext(ctx)

	userNsLength := uint32(DefaultIDsPerPod)
	if cfg.IDsPerPod != nil {
		userNsLength = uint32(*cfg.IDsPerPod)
	}
	kubeletMappingID, kubeletMappingLen, err := cfg.KubeletMappings(ctx, userNsLength)
	if err != nil {
		return nil, fmt.Errorf("kubelet mappings: %w", err)
	}
	off, n, err := blocks(kubeletMappingID, kubeletMappingLen, userNsLength, cfg.MaxPods)
	if err != nil {
		return nil, err
	}
	logger.V(5).Info("User namespace manager mapping", "offset", off, "length", n, "idsPerPod", userNsLength)

	m := &Manager{
		cfg:          cfg,
		off:          off,
		len:          n,
		userNsLength: userNsLength,
		used:         newBitmap(n),
		usedBy:       make(map[types.UID]uint32),
	}

	found, err := m.listPodsFromDisk()
	if err != nil {
		if os.IsNotExist(err) {
			return m, nil
		}
		return nil, fmt.Errorf("read pods from disk: %w", err)
	}
	for _, podUID := range found {
		logger.V(5).Info("reading pod from disk for user namespace", "podUID", podUID)
		if err := m.recordPodMappings(logger, podUID); err != nil {
			return nil, fmt.Errorf("record pod mappings for existing pod %q: %w", podUID, err)
		}
	}
	return m, nil
}

// blocks checks the kubelet's range [firstID, firstID+length) against the
// block length and maxPods, with upstream's errors, and returns it in
// blocks: the index of its first block and how many it has.
func blocks(firstID, length, userNsLength uint32, maxPods int) (off, n int, err error) {
	if userNsLength%userNsUnitLength != 0 {
		return 0, 0, fmt.Errorf("kubelet user namespace length %v is not a multiple of %d", userNsLength, userNsUnitLength)
	}
	if firstID%userNsLength != 0 {
		return 0, 0, fmt.Errorf("kubelet user assigned ID %v is not a multiple of %v", firstID, userNsLength)
	}
	if firstID < userNsLength {
		// Mapping ID 0 would circumvent security.
		return 0, 0, fmt.Errorf("kubelet user assigned ID %v must be greater or equal to %v", firstID, userNsLength)
	}
	if length%userNsLength != 0 {
		return 0, 0, fmt.Errorf("kubelet user assigned IDs length %v is not a multiple of %v", length, userNsLength)
	}
	if length/userNsLength < uint32(maxPods) {
		return 0, 0, fmt.Errorf("kubelet user assigned IDs are not enough to support %v pods", maxPods)
	}
	return int(firstID / userNsLength), int(length / userNsLength), nil
}

func (m *Manager) podDir(pod types.UID) string {
	return filepath.Join(m.cfg.PodsDir, string(pod))
}

// listPodsFromDisk lists the pod directories, as the kubelet's
// listPodsFromDisk.
func (m *Manager) listPodsFromDisk() ([]types.UID, error) {
	entries, err := os.ReadDir(m.cfg.PodsDir)
	if err != nil {
		return nil, err
	}
	pods := []types.UID{}
	for _, e := range entries {
		if e.IsDir() {
			pods = append(pods, types.UID(e.Name()))
		}
	}
	return pods, nil
}

// recordPodMappings records the block in the pod's userns file, if it has
// one (a pod without it has no user namespace).
func (m *Manager) recordPodMappings(logger klog.Logger, pod types.UID) error {
	content, err := readRecord(m.podDir(pod))
	if err != nil && !errors.Is(err, errNoRecord) {
		return err
	}
	if len(content) == 0 {
		return nil
	}
	_, err = m.parseUserNsFileAndRecord(logger, pod, content)
	return err
}

// isSet tells whether the block starting at ID v is in use; IDs outside
// the range count as used.
func (m *Manager) isSet(v uint32) bool {
	index := int(v/m.userNsLength) - m.off
	if index < 0 || index >= m.len {
		return true
	}
	return m.used.has(index)
}

// allocateOne takes a free block for pod and returns its first ID and
// length.
func (m *Manager) allocateOne(logger klog.Logger, pod types.UID) (firstID uint32, length uint32, err error) {
	firstZero, found := m.used.allocateNext()
	if !found {
		return 0, 0, fmt.Errorf("could not find an empty slot to allocate a user namespace")
	}

	logger.V(5).Info("new pod user namespace allocation", "podUID", pod)

	firstID = uint32(firstZero+m.off) * m.userNsLength
	m.usedBy[pod] = firstID
	return firstID, m.userNsLength, nil
}

// record gives pod the block [from, from+length).
func (m *Manager) record(logger klog.Logger, pod types.UID, from, length uint32) error {
	if length != m.userNsLength {
		return fmt.Errorf("wrong user namespace length %v", length)
	}
	if from%m.userNsLength != 0 {
		return fmt.Errorf("wrong user namespace offset specified %v", from)
	}
	prevFrom, found := m.usedBy[pod]
	if found && prevFrom != from {
		return fmt.Errorf("different user namespace range already used by pod %q", pod)
	}
	index := int(from/m.userNsLength) - m.off
	if index < 0 || index >= m.len {
		return fmt.Errorf("id %v is out of range", from)
	}
	if !found && m.used.has(index) {
		return fmt.Errorf("range picked for pod %q already taken", pod)
	}
	if found && prevFrom == from {
		return nil
	}

	logger.V(5).Info("new pod user namespace allocation", "podUID", pod)

	m.used.allocate(index)
	m.usedBy[pod] = from
	return nil
}

// Release frees the pod's block, if it has one, and removes its record.
// The kubelet calls it once the pod is terminated.
func (m *Manager) Release(ctx context.Context, podUID types.UID) {
	logger := klog.FromContext(ctx)
	m.lock.Lock()
	defer m.lock.Unlock()
	m.releaseWithLock(logger, podUID)
}

// podAllocated tells whether the pod has a block.
func (m *Manager) podAllocated(podUID types.UID) bool {
	m.lock.Lock()
	defer m.lock.Unlock()
	_, ok := m.usedBy[podUID]
	return ok
}

func (m *Manager) releaseWithLock(logger klog.Logger, pod types.UID) {
	v, ok := m.usedBy[pod]
	if !ok {
		logger.V(5).Info("pod user namespace allocation not present", "podUID", pod)
		return
	}
	delete(m.usedBy, pod)

	logger.V(5).Info("releasing pod user namespace allocation", "podUID", pod)
	m.removed++

	_ = os.Remove(filepath.Join(m.podDir(pod), mappingsFile))

	if m.removed%mapReInitializeThreshold == 0 {
		n := make(map[types.UID]uint32, len(m.usedBy))
		for k, v := range m.usedBy {
			n[k] = v
		}
		m.usedBy = n
		m.removed = 0
	}
	m.used.release(int(v/m.userNsLength) - m.off)
}

func (m *Manager) parseUserNsFileAndRecord(logger klog.Logger, pod types.UID, content []byte) (userNamespace, error) {
	userNs, err := parseRecord(content)
	if err != nil {
		return userNs, err
	}
	return userNs, m.record(logger, pod, userNs.UIDMappings[0].HostId, userNs.UIDMappings[0].Length)
}

func (m *Manager) createUserNs(logger klog.Logger, pod *v1.Pod) (userNs userNamespace, err error) {
	firstID, length, err := m.allocateOne(logger, pod.UID)
	if err != nil {
		return
	}
	defer func() {
		if err != nil {
			m.releaseWithLock(logger, pod.UID)
		}
	}()

	userNs = userNamespace{
		UIDMappings: []idMapping{{ContainerId: 0, HostId: firstID, Length: length}},
		GIDMappings: []idMapping{{ContainerId: 0, HostId: firstID, Length: length}},
	}
	return userNs, writeRecord(m.podDir(pod.UID), userNs)
}

// GetOrCreateUserNamespaceMappings returns the user namespace of the
// pod's sandbox: NODE when the pod uses the host's (no pod, or hostUsers
// unset or true); for hostUsers: false, POD with the pod's block as UID
// and GID mappings (container ID 0 to its first ID), read from the pod's
// record or allocated and recorded, after checking that the runtime
// handler supports user namespaces.
func (m *Manager) GetOrCreateUserNamespaceMappings(ctx context.Context, pod *v1.Pod, runtimeHandler string) (*runtimeapi.UserNamespace, error) {
	if !wantsUserNamespace(pod) {
		return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}, nil
	}
	logger := klog.FromContext(ctx)

	supported, err := m.cfg.HandlerSupportsUserNamespaces(runtimeHandler)
	if err := handlerError(runtimeHandler, supported, err); err != nil {
		return nil, err
	}

	m.lock.Lock()
	defer m.lock.Unlock()

	content, err := readRecord(m.podDir(pod.UID))
	if err != nil && !errors.Is(err, errNoRecord) {
		return nil, err
	}

	var userNs userNamespace
	if string(content) != "" {
		userNs, err = m.parseUserNsFileAndRecord(logger, pod.UID, content)
		if err != nil {
			return nil, fmt.Errorf("user namespace: %w", err)
		}
	} else {
		userNs, err = m.createUserNs(logger, pod)
		if err != nil {
			return nil, fmt.Errorf("create user namespace: %w", err)
		}
	}
	return toCRI(userNs), nil
}

// wantsUserNamespace tells whether the pod asks for a user namespace of
// its own: hostUsers set to false (unset means the host's).
func wantsUserNamespace(pod *v1.Pod) bool {
	return pod != nil && pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers
}

// handlerError is upstream's refusal of hostUsers: false when the runtime
// handler does not support user namespaces, or cannot tell; nil when it
// does.
func handlerError(runtimeHandler string, supported bool, err error) error {
	if err == nil && supported {
		return nil
	}
	msg := "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
	if runtimeHandler != "" {
		msg = fmt.Sprintf("can't set `spec.hostUsers: false`, RuntimeClass handler %q does not support user namespaces", runtimeHandler)
	}
	if err != nil {
		return fmt.Errorf("%v: %w", msg, err)
	}
	return fmt.Errorf("%v", msg)
}

func toCRI(userNs userNamespace) *runtimeapi.UserNamespace {
	var uids, gids []*runtimeapi.IDMapping
	for _, u := range userNs.UIDMappings {
		uids = append(uids, &runtimeapi.IDMapping{HostId: u.HostId, ContainerId: u.ContainerId, Length: u.Length})
	}
	for _, g := range userNs.GIDMappings {
		gids = append(gids, &runtimeapi.IDMapping{HostId: g.HostId, ContainerId: g.ContainerId, Length: g.Length})
	}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: uids, Gids: gids}
}

// CleanupOrphaned frees the blocks of pods the kubelet no longer knows, as
// upstream's CleanupOrphanedPodUsernsAllocations: known reports whether a
// pod UID is among the pods of the pod manager or those running in the
// runtime. The blocks of pod directories under PodsDir that are not known
// are freed, and so are those of pods with no directory left.
func (m *Manager) CleanupOrphaned(ctx context.Context, known func(types.UID) bool) error {
	logger := klog.FromContext(ctx)

	m.lock.Lock()
	defer m.lock.Unlock()

	found, err := m.listPodsFromDisk()
	if err != nil {
		return fmt.Errorf("user namespace: read pods from disk: %w", err)
	}
	allFound := make(map[types.UID]bool, len(found))
	for _, podUID := range found {
		allFound[podUID] = true
	}

	for _, podUID := range found {
		if known(podUID) {
			continue
		}
		logger.V(5).Info("Clean up orphaned pod user namespace possible allocation", "podUID", podUID)
		m.releaseWithLock(logger, podUID)
	}

	for podUID := range m.usedBy {
		if allFound[podUID] {
			continue
		}
		logger.V(5).Info("Clean up orphaned pod user namespace possible allocation", "podUID", podUID)
		m.releaseWithLock(logger, podUID)
	}
	return nil
}
