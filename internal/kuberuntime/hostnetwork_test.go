package kuberuntime

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// A host-network pod's IPs are the node's (status.podIP in its env), as
// upstream: the sandbox has no IP of its own.
func TestNewPodFacts(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "c")
	host := []string{"10.88.0.1"}
	if f := newPodFacts(pod, []string{"10.88.0.9"}, host); !slices.Equal(f.PodIPs, []string{"10.88.0.9"}) {
		t.Errorf("pod network: PodIPs %v", f.PodIPs)
	}
	pod.Spec.HostNetwork = true
	if f := newPodFacts(pod, nil, host); !slices.Equal(f.PodIPs, host) || !slices.Equal(f.HostIPs, host) {
		t.Errorf("host network: PodIPs %v HostIPs %v, want the node's", f.PodIPs, f.HostIPs)
	}
}
