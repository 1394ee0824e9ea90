// Package podresources owns the kubelet's pod-resources API: the gRPC
// services podresources v1 (List, Get, GetAllocatableResources) and
// v1alpha1 (List) on <root-dir>/pod-resources/kubelet.sock, as upstream's
// pkg/kubelet/apis/podresources, rate limited as upstream (100 requests/s,
// bursts of 10) and counted in upstream's kubelet_pod_resources_endpoint_*
// metrics. It reads the node's pods and the devices assigned to their
// containers through small interfaces; it keeps no state of its own.
package podresources
