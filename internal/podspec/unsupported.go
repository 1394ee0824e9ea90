package podspec

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Unsupported lists the fields of pod that nodelet cannot honour, so the pod is refused with a clear reason instead of
// running without them. Empty when everything is supported.
func Unsupported(pod *v1.Pod) []string {
	var out []string
	spec := &pod.Spec
	// As upstream's static pod sources (ErrStaticPodTriedToUseResourceClaims);
	// an API pod's claims are prepared by the DRA manager.
	static := IsStatic(pod)
	if static && len(spec.ResourceClaims) > 0 {
		out = append(out, "spec.resourceClaims (static pods may not use ResourceClaims)")
	}
	all := func(f func(path string, c *v1.Container)) {
		for i := range spec.InitContainers {
			f(fmt.Sprintf("spec.initContainers[%d]", i), &spec.InitContainers[i])
		}
		for i := range spec.Containers {
			f(fmt.Sprintf("spec.containers[%d]", i), &spec.Containers[i])
		}
		for i := range spec.EphemeralContainers {
			f(fmt.Sprintf("spec.ephemeralContainers[%d]", i), (*v1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
		}
	}
	all(func(path string, c *v1.Container) {
		for i, d := range c.VolumeDevices {
			// Only a PVC (or a generic ephemeral volume's) can be a block
			// volume; whether its PV is one shows when it is set up.
			if v := VolumeNamed(spec, d.Name); v == nil || (v.PersistentVolumeClaim == nil && v.Ephemeral == nil) {
				out = append(out, fmt.Sprintf("%s.volumeDevices[%d] (%s is not a persistentVolumeClaim or ephemeral volume)", path, i, d.Name))
			}
		}
		if static && len(c.Resources.Claims) > 0 {
			out = append(out, path+".resources.claims (static pods may not use ResourceClaims)")
		}
	})
	return out
}

// UnsupportedMessage is the refusal message for Unsupported's list.
func UnsupportedMessage(fields []string) string {
	return "Pod uses what this node cannot provide: " + strings.Join(fields, "; ")
}

// VolumeNamed is the pod's volume called name, nil when it has none.
func VolumeNamed(spec *v1.PodSpec, name string) *v1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}
