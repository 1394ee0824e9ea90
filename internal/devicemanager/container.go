package devicemanager

import (
	"context"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// ContainerResources is what the container's devices add to its CRI
// config: devices, mounts, env, annotations and CDI names from the
// plugins' Allocate answers (the first of a container path wins across
// resources, as upstream). A plugin that asked for PreStartContainer is
// called first; its failure fails the container's start.
func (m *Manager) ContainerResources(ctx context.Context, pod *v1.Pod, c *v1.Container) (*runtimeapi.ContainerConfig, error) {
	m.mu.Lock()
	rs := m.alloc[string(pod.UID)][c.Name]
	type preStart struct {
		p   *plugin
		r   string
		ids []string
	}
	var calls []preStart
	for _, r := range sortedKeys(rs) {
		st := m.resources[r]
		if st == nil {
			m.mu.Unlock()
			return nil, fmt.Errorf("endpoint not found in cache for a registered resource: %s", r)
		}
		// A plugin not connected (yet, after a restart) is not asked.
		if st.plugin != nil && st.plugin.options.GetPreStartRequired() {
			calls = append(calls, preStart{st.plugin, r, rs[r].IDs})
		}
	}
	m.mu.Unlock()
	for _, call := range calls {
		pctx, cancel := context.WithTimeout(ctx, preStartTimeout)
		_, err := call.p.client.PreStartContainer(pctx, &pluginapi.PreStartContainerRequest{DevicesIds: call.ids})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("device plugin PreStartContainer rpc failed with err: %w", err)
		}
		klog.FromContext(ctx).V(2).Info("Device plugin's PreStartContainer done", "pod", klog.KObj(pod), "container", c.Name, "resource", call.r)
	}
	return merge(rs), nil
}

// merge puts the containers' Allocate answers together, resources in name
// order.
func merge(rs map[string]*entry) *runtimeapi.ContainerConfig {
	out := &runtimeapi.ContainerConfig{}
	devs, mounts := map[string]bool{}, map[string]bool{}
	envs := map[string]string{}
	for _, r := range sortedKeys(rs) {
		resp := rs[r].Resp
		for _, d := range resp.Devices {
			if devs[d.ContainerPath] {
				continue
			}
			devs[d.ContainerPath] = true
			out.Devices = append(out.Devices, &runtimeapi.Device{ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: d.Permissions})
		}
		for _, mt := range resp.Mounts {
			if mounts[mt.ContainerPath] {
				continue
			}
			mounts[mt.ContainerPath] = true
			out.Mounts = append(out.Mounts, &runtimeapi.Mount{ContainerPath: mt.ContainerPath, HostPath: mt.HostPath, Readonly: mt.ReadOnly})
		}
		maps.Copy(envs, resp.Envs)
		if len(resp.Annotations) > 0 {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			maps.Copy(out.Annotations, resp.Annotations)
		}
		for _, d := range resp.CdiDevices {
			out.CDIDevices = append(out.CDIDevices, &runtimeapi.CDIDevice{Name: d.Name})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(envs)) {
		out.Envs = append(out.Envs, &runtimeapi.KeyValue{Key: k, Value: []byte(envs[k])})
	}
	return out
}

// ContainerDevices are the devices assigned to the pod's container, for
// the pod-resources API.
func (m *Manager) ContainerDevices(podUID, container string) []*podresourcesv1.ContainerDevices {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := m.alloc[podUID][container]
	var out []*podresourcesv1.ContainerDevices
	for _, r := range sortedKeys(rs) {
		out = append(out, &podresourcesv1.ContainerDevices{ResourceName: r, DeviceIds: slices.Clone(rs[r].IDs), Topology: m.topologyLocked(r, rs[r].IDs)})
	}
	return out
}

// AllocatableDevices are the healthy devices of the connected plugins,
// one entry a device, for the pod-resources API.
func (m *Manager) AllocatableDevices() []*podresourcesv1.ContainerDevices {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*podresourcesv1.ContainerDevices
	for _, r := range sortedKeys(m.resources) {
		for _, id := range m.resources[r].healthy() {
			out = append(out, &podresourcesv1.ContainerDevices{ResourceName: r, DeviceIds: []string{id}, Topology: m.topologyLocked(r, []string{id})})
		}
	}
	return out
}

// topologyLocked are the NUMA nodes the plugin gave for the devices.
func (m *Manager) topologyLocked(r string, ids []string) *podresourcesv1.TopologyInfo {
	st := m.resources[r]
	if st == nil {
		return nil
	}
	var nodes []*podresourcesv1.NUMANode
	seen := map[int64]bool{}
	for _, id := range ids {
		d := st.devices[id]
		if d == nil || d.Topology == nil {
			continue
		}
		for _, n := range d.Topology.Nodes {
			if !seen[n.ID] {
				seen[n.ID] = true
				nodes = append(nodes, &podresourcesv1.NUMANode{ID: n.ID})
			}
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	return &podresourcesv1.TopologyInfo{Nodes: nodes}
}
