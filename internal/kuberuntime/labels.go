package kuberuntime

import (
	"encoding/json"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/podspec"
)

// Label and annotation keys, as the upstream kubelet writes them.
const (
	PodNameLabel       = "io.kubernetes.pod.name"
	PodNamespaceLabel  = "io.kubernetes.pod.namespace"
	PodUIDLabel        = "io.kubernetes.pod.uid"
	ContainerNameLabel = "io.kubernetes.container.name"

	containerHashAnnotation              = "io.kubernetes.container.hash"
	containerRestartCountAnnotation      = "io.kubernetes.container.restartCount"
	containerTerminationPathAnnotation   = "io.kubernetes.container.terminationMessagePath"
	containerTerminationPolicyAnnotation = "io.kubernetes.container.terminationMessagePolicy"
	podTerminationGraceAnnotation        = "io.kubernetes.pod.terminationGracePeriod"
	containerPortsAnnotation             = "io.kubernetes.container.ports"
)

func sandboxLabels(pod *v1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[PodNameLabel] = pod.Name
	l[PodNamespaceLabel] = pod.Namespace
	l[PodUIDLabel] = string(pod.UID)
	return l
}

func sandboxAnnotations(pod *v1.Pod) map[string]string {
	a := make(map[string]string, len(pod.Annotations))
	for k, v := range pod.Annotations {
		a[k] = v
	}
	return a
}

func containerLabels(pod *v1.Pod, c *v1.Container) map[string]string {
	return map[string]string{
		PodNameLabel:       pod.Name,
		PodNamespaceLabel:  pod.Namespace,
		PodUIDLabel:        string(pod.UID),
		ContainerNameLabel: c.Name,
	}
}

func containerAnnotations(pod *v1.Pod, c *v1.Container, restartCount int) map[string]string {
	a := map[string]string{
		containerHashAnnotation:              podspec.ContainerHash(c),
		containerRestartCountAnnotation:      strconv.Itoa(restartCount),
		containerTerminationPathAnnotation:   c.TerminationMessagePath,
		containerTerminationPolicyAnnotation: string(c.TerminationMessagePolicy),
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		a[podTerminationGraceAnnotation] = strconv.FormatInt(*g, 10)
	}
	if len(c.Ports) > 0 {
		if raw, err := json.Marshal(c.Ports); err == nil {
			a[containerPortsAnnotation] = string(raw)
		}
	}
	return a
}
