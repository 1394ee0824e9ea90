package dra

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// ContainerDynamicResources is what the pod-resources API reports of a
// container's claims (upstream's GetDynamicResources): each claim the
// container names in resources.claims, and the pod's extended resource
// claim when an extended resource of the container is mapped to it, with
// every allocated device of each driver. As upstream, a driver's CDI
// device list accumulates over its devices (each device's entry lists the
// CDI IDs of the devices before it too). A claim the node does not know
// (yet) makes the answer empty.
func (m *Manager) ContainerDynamicResources(pod *v1.Pod, c *v1.Container) []*podresourcesv1.DynamicResource {
	names, err := containerClaimNames(pod, c)
	if err != nil {
		return nil
	}
	m.cache.mu.RLock()
	defer m.cache.mu.RUnlock()
	var out []*podresourcesv1.DynamicResource
	for _, name := range names {
		info, ok := m.cache.get(pod.Namespace, name)
		if !ok {
			return nil
		}
		drivers := make([]string, 0, len(info.DriverState))
		for d := range info.DriverState {
			drivers = append(drivers, d)
		}
		sort.Strings(drivers)
		var resources []*podresourcesv1.ClaimResource
		for _, driver := range drivers {
			var cdi []*podresourcesv1.CDIDevice
			for _, d := range info.DriverState[driver].Devices {
				for _, id := range d.CDIDeviceIDs {
					cdi = append(cdi, &podresourcesv1.CDIDevice{Name: id})
				}
				resources = append(resources, &podresourcesv1.ClaimResource{CdiDevices: cdi, DriverName: driver,
					PoolName: d.PoolName, DeviceName: d.DeviceName, ShareId: (*string)(d.ShareID)})
			}
		}
		out = append(out, &podresourcesv1.DynamicResource{ClaimName: info.ClaimName, ClaimNamespace: info.Namespace, ClaimResources: resources})
	}
	return out
}

// containerClaimNames are the ResourceClaims the container uses, in the
// pod's order, its extended resource claim last (upstream's
// GetContainerClaimInfos).
func containerClaimNames(pod *v1.Pod, c *v1.Container) ([]string, error) {
	uses := map[string]bool{}
	for _, cc := range c.Resources.Claims {
		uses[cc.Name] = true
	}
	var out []string
	for i := range pod.Spec.ResourceClaims {
		if !uses[pod.Spec.ResourceClaims[i].Name] {
			continue
		}
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			return nil, err
		}
		if name != nil {
			out = append(out, *name)
		}
	}
	if s := pod.Status.ExtendedResourceClaimStatus; s != nil {
		for _, rm := range s.RequestMappings {
			if rm.ContainerName == c.Name {
				out = append(out, s.ResourceClaimName)
				break
			}
		}
	}
	return out, nil
}
