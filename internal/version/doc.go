// Package version owns what nodelet says of itself: the kubelet version it
// implements (reported in the Node's nodeInfo and by --version, in the form
// kubeadm's preflight check parses) and the build of nodelet itself (the
// VCS revision the Go toolchain embedded).
package version
