package podspec

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// FieldValue resolves a downward API fieldRef of pod, for env and
// downwardAPI volumes: metadata.name, namespace, uid, labels and
// annotations (whole, as key="value" lines, or one key with ['key']),
// spec.nodeName, spec.serviceAccountName, status.podIP(s) and
// status.hostIP(s) (from podIPs and hostIPs, which the pod's status may
// not have yet). The API server validates which fields each use allows.
func FieldValue(pod *v1.Pod, path string, podIPs, hostIPs []string) (string, error) {
	if name, key, ok := subscript(path); ok {
		switch name {
		case "metadata.labels":
			return pod.Labels[key], nil
		case "metadata.annotations":
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("unsupported fieldRef %q", path)
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return first(podIPs), nil
	case "status.podIPs":
		return strings.Join(podIPs, ","), nil
	case "status.hostIP":
		return first(hostIPs), nil
	case "status.hostIPs":
		return strings.Join(hostIPs, ","), nil
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// subscript splits "metadata.labels['key']" into its parts.
func subscript(fp string) (name, key string, ok bool) {
	i := strings.Index(fp, "['")
	if i < 0 || !strings.HasSuffix(fp, "']") {
		return "", "", false
	}
	return fp[:i], fp[i+2 : len(fp)-2], true
}

// formatMap prints labels or annotations as upstream's downward API does:
// sorted key="value" lines.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	return b.String()
}
