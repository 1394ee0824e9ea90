package devicemanager

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// UpdateAllocatedResourcesStatus sets, in each container status of pod,
// the health of the devices assigned to the container
// (allocatedResourcesStatus, gate ResourceHealthStatus), as upstream's
// device manager: one entry per resource, one per device, Healthy unless
// the plugin last reported the device otherwise (a device the plugin no
// longer lists counts as Healthy, as upstream). Entries of other
// resources (DRA claims) are kept.
func (m *Manager) UpdateAllocatedResourcesStatus(pod *v1.Pod, status *v1.PodStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range status.ContainerStatuses {
		cs := &status.ContainerStatuses[i]
		rs := m.alloc[string(pod.UID)][cs.Name]
		for _, r := range sortedKeys(rs) {
			entry := v1.ResourceStatus{Name: v1.ResourceName(r), Resources: []v1.ResourceHealth{}}
			ids := slices.Clone(rs[r].IDs)
			slices.Sort(ids)
			for _, id := range ids {
				health := v1.ResourceHealthStatusHealthy
				if st := m.resources[r]; st != nil {
					if d, ok := st.devices[id]; ok && d.Health != pluginapi.Healthy {
						health = v1.ResourceHealthStatusUnhealthy
					}
				}
				entry.Resources = append(entry.Resources, v1.ResourceHealth{ResourceID: v1.ResourceID(id), Health: health})
			}
			if j := slices.IndexFunc(cs.AllocatedResourcesStatus, func(s v1.ResourceStatus) bool { return s.Name == entry.Name }); j >= 0 {
				cs.AllocatedResourcesStatus[j] = entry
			} else {
				cs.AllocatedResourcesStatus = append(cs.AllocatedResourcesStatus, entry)
			}
		}
	}
}

// OnPodsChanged sets Config.PodsChanged (before Run).
func (m *Manager) OnPodsChanged(f func(uids []types.UID)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cfg.PodsChanged = f
}

// podsUsingLocked are the pods with devices of resource r; m.mu is held.
func (m *Manager) podsUsingLocked(r string) []types.UID {
	var out []types.UID
	for uid, cs := range m.alloc {
		for _, rs := range cs {
			if len(rs[r].idsOrNil()) > 0 {
				out = append(out, types.UID(uid))
				break
			}
		}
	}
	slices.Sort(out)
	return out
}
