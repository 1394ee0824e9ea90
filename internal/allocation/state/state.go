package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/checksum"
	"github.com/nodelet/nodelet/internal/fsutil"
)

// The checkpoint files' names in the root directory, as upstream.
const (
	AllocatedFile = "allocated_pods_state"
	ActuatedFile  = "actuated_pods_state"
)

// PodResourceInfo is one pod's record, upstream's state.PodResourceInfo
// (its JSON field names are upstream's Go names).
type PodResourceInfo struct {
	// ContainerResources by container name.
	ContainerResources map[string]v1.ResourceRequirements
	// PodLevelResources, when the pod has them.
	PodLevelResources *v1.ResourceRequirements
	// EmptyDirVolumeLimits by volume name.
	EmptyDirVolumeLimits map[string]*resource.Quantity
}

// InfoForPod is the record of pod's resources, as upstream's
// ResourceInfoForPod: every container's (init containers included; a
// running init container is resized like the others) and the pod-level
// ones. Memory-backed emptyDir limits are not recorded: nodelet does not
// resize them (InPlacePodVerticalScalingMemoryBackedVolumes is not
// declared).
func InfoForPod(pod *v1.Pod) PodResourceInfo {
	info := PodResourceInfo{ContainerResources: map[string]v1.ResourceRequirements{}, PodLevelResources: pod.Spec.Resources.DeepCopy()}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			info.ContainerResources[cs[i].Name] = *cs[i].Resources.DeepCopy()
		}
	}
	return info
}

// DeepCopy copies i.
func (i PodResourceInfo) DeepCopy() PodResourceInfo {
	out := PodResourceInfo{PodLevelResources: i.PodLevelResources.DeepCopy()}
	if i.ContainerResources != nil {
		out.ContainerResources = make(map[string]v1.ResourceRequirements, len(i.ContainerResources))
		for name, r := range i.ContainerResources {
			out.ContainerResources[name] = *r.DeepCopy()
		}
	}
	if i.EmptyDirVolumeLimits != nil {
		out.EmptyDirVolumeLimits = make(map[string]*resource.Quantity, len(i.EmptyDirVolumeLimits))
		for name, q := range i.EmptyDirVolumeLimits {
			if q != nil {
				c := q.DeepCopy()
				q = &c
			}
			out.EmptyDirVolumeLimits[name] = q
		}
	}
	return out
}

// checkpointData is upstream's PodResourceCheckpointInfo.
type checkpointData struct {
	Entries map[types.UID]PodResourceInfo `json:"entries,omitempty"`
}

// checkpoint is upstream's state.Checkpoint: Data is checkpointData's
// JSON, Checksum upstream's checksum of it.
type checkpoint struct {
	Data     string `json:"data"`
	Checksum uint64 `json:"checksum"`
}

// State is a set of pod records, written through to its file. Safe for
// concurrent use.
type State struct {
	mu   sync.RWMutex
	path string
	pods map[types.UID]PodResourceInfo
}

// Open reads the checkpoint name in dir (none is an empty state); dir ""
// keeps the state in memory only. A checkpoint that does not verify is an
// error naming the file, as upstream (which refuses to start then).
func Open(dir, name string) (*State, error) {
	s := &State{pods: map[types.UID]PodResourceInfo{}}
	if dir == "" {
		return s, nil
	}
	s.path = filepath.Join(dir, name)
	raw, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	var cp checkpoint
	if err := json.Unmarshal(raw, &cp); err != nil {
		return nil, corrupt(s.path, err)
	}
	if sum := checksum.String(cp.Data); sum != cp.Checksum {
		return nil, corrupt(s.path, fmt.Errorf("checksum %d, the data's is %d", cp.Checksum, sum))
	}
	var data checkpointData
	if err := json.Unmarshal([]byte(cp.Data), &data); err != nil {
		return nil, corrupt(s.path, err)
	}
	for uid, info := range data.Entries {
		s.pods[uid] = info
	}
	return s, nil
}

func corrupt(path string, err error) error {
	return fmt.Errorf("could not restore state from checkpoint: %w, please drain this node and delete pod allocation checkpoint file %q before restarting the node agent", err, path)
}

// store writes the state (a new file renamed over the old one); mu held.
func (s *State) store() error {
	if s.path == "" {
		return nil
	}
	raw, err := json.Marshal(checkpointData{Entries: s.pods})
	if err != nil {
		return err
	}
	out, err := json.Marshal(checkpoint{Data: string(raw), Checksum: checksum.String(string(raw))})
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(s.path, out, 0o600)
}

// Pod returns a copy of the pod's record.
func (s *State) Pod(uid types.UID) (PodResourceInfo, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	info, ok := s.pods[uid]
	if !ok {
		return PodResourceInfo{}, false
	}
	return info.DeepCopy(), true
}

// Container returns a copy of one container's resources in the pod's
// record.
func (s *State) Container(uid types.UID, name string) (v1.ResourceRequirements, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.pods[uid].ContainerResources[name]
	if !ok {
		return v1.ResourceRequirements{}, false
	}
	return *r.DeepCopy(), true
}

// UIDs are the pods with a record.
func (s *State) UIDs() []types.UID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]types.UID, 0, len(s.pods))
	for uid := range s.pods {
		out = append(out, uid)
	}
	return out
}

// SetPod replaces the pod's record.
func (s *State) SetPod(uid types.UID, info PodResourceInfo) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods[uid] = info.DeepCopy()
	return s.store()
}

// SetContainer records one container's resources in the pod's record.
func (s *State) SetContainer(uid types.UID, name string, r v1.ResourceRequirements) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := s.pods[uid]
	if info.ContainerResources == nil {
		info.ContainerResources = map[string]v1.ResourceRequirements{}
	}
	info.ContainerResources[name] = *r.DeepCopy()
	s.pods[uid] = info
	return s.store()
}

// Remove forgets the pod.
func (s *State) Remove(uid types.UID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pods[uid]; !ok {
		return nil
	}
	delete(s.pods, uid)
	return s.store()
}

// RemoveOrphans forgets the pods keep does not want.
func (s *State) RemoveOrphans(keep func(types.UID) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	removed := false
	for uid := range s.pods {
		if !keep(uid) {
			delete(s.pods, uid)
			removed = true
		}
	}
	if !removed {
		return nil
	}
	return s.store()
}
