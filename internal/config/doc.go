// Package config owns nodelet's configuration: the upstream kubelet's
// command-line flags and its kubelet.config.k8s.io/v1beta1
// KubeletConfiguration file, defaulted as the upstream kubelet defaults them.
// Flags given on the command line override the file, as upstream.
package config
