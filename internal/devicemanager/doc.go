// Package devicemanager owns the node's device plugins, as upstream's
// pkg/kubelet/cm/devicemanager: it serves the deviceplugin v1beta1
// Registration service on <root-dir>/device-plugins/kubelet.sock, connects
// to each registered plugin's socket in that folder, follows its devices
// (ListAndWatch) and reports them as the node's extended resources
// (capacity: all devices; allocatable: the healthy ones; a plugin gone is
// all unhealthy, and after 5 minutes its resource is removed). At
// admission it assigns devices to a pod's containers (a plain init
// container's devices are reused by the containers after it; the plugin's
// GetPreferredAllocation is asked when it offers one) and calls the
// plugin's Allocate; the answer (devices, mounts, env, annotations, CDI
// names) is given to the container when it is created, after the plugin's
// PreStartContainer when it asks for one. Assignments and the registered
// devices are kept in a checkpoint in that folder, so a restart keeps
// every running pod's devices. Which devices a container gets is a pure
// function (choose).
package devicemanager
