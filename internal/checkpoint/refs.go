package checkpoint

import (
	"sort"

	v1 "k8s.io/api/core/v1"
)

// Refs are the names of the API objects of its namespace a pod uses.
type Refs struct {
	ConfigMaps, Secrets []string
	// Claims are the PersistentVolumeClaims of its persistentVolumeClaim and
	// ephemeral volumes.
	Claims []string
	// InlineDrivers are the drivers of its inline CSI volumes.
	InlineDrivers []string
}

// References lists what pod's volumes, environment and image pulls read
// from the API, each name once, sorted.
func References(pod *v1.Pod) Refs {
	cms, secs, claims, drivers := set{}, set{}, set{}, set{}
	for _, s := range pod.Spec.ImagePullSecrets {
		secs.add(s.Name)
	}
	for _, vol := range pod.Spec.Volumes {
		switch {
		case vol.ConfigMap != nil:
			cms.add(vol.ConfigMap.Name)
		case vol.Secret != nil:
			secs.add(vol.Secret.SecretName)
		case vol.Projected != nil:
			for _, src := range vol.Projected.Sources {
				if src.ConfigMap != nil {
					cms.add(src.ConfigMap.Name)
				}
				if src.Secret != nil {
					secs.add(src.Secret.Name)
				}
			}
		case vol.PersistentVolumeClaim != nil:
			claims.add(vol.PersistentVolumeClaim.ClaimName)
		case vol.Ephemeral != nil:
			claims.add(pod.Name + "-" + vol.Name)
		case vol.CSI != nil:
			drivers.add(vol.CSI.Driver)
			if vol.CSI.NodePublishSecretRef != nil {
				secs.add(vol.CSI.NodePublishSecretRef.Name)
			}
		}
	}
	env := func(c *v1.Container) {
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				cms.add(r.Name)
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				secs.add(r.Name)
			}
		}
		for _, f := range c.EnvFrom {
			if f.ConfigMapRef != nil {
				cms.add(f.ConfigMapRef.Name)
			}
			if f.SecretRef != nil {
				secs.add(f.SecretRef.Name)
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		env(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		env(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.EphemeralContainers {
		env((*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	return Refs{ConfigMaps: cms.sorted(), Secrets: secs.sorted(), Claims: claims.sorted(), InlineDrivers: drivers.sorted()}
}

type set map[string]bool

func (s set) add(name string) {
	if name != "" {
		s[name] = true
	}
}

func (s set) sorted() []string {
	if len(s) == 0 {
		return nil
	}
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
