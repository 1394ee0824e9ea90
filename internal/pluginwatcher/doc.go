// Package pluginwatcher owns the kubelet's plugin registration, as upstream's
// pkg/kubelet/pluginmanager: it watches <root-dir>/plugins_registry (and
// the folders in it) for unix sockets of plugins serving the
// pluginregistration v1 Registration service (k8s.io/kubelet), asks each
// for its info (GetInfo), hands it to the Handler of its type (CSIPlugin,
// DevicePlugin, DRAPlugin) to validate and register, and tells the plugin
// how that went (NotifyRegistrationStatus). A plugin whose socket goes is
// deregistered. A registration that failed is tried again with back-off
// (1 s doubling to 2 min), without the socket having to be recreated. Which sockets to register, retry or drop is a pure
// function of the folder and the state (plan).
package pluginwatcher
