package podspec

import (
	"crypto/md5" //nolint:gosec // an identifier, as upstream, not a security boundary
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/dump"
)

// Annotations and values the upstream kubelet uses for pods from its sources.
const (
	ConfigSourceAnnotationKey    = "kubernetes.io/config.source"
	ConfigHashAnnotationKey      = "kubernetes.io/config.hash"
	ConfigMirrorAnnotationKey    = "kubernetes.io/config.mirror"
	ConfigFirstSeenAnnotationKey = "kubernetes.io/config.seen"

	FileSource      = "file"
	HTTPSource      = "http"
	APIServerSource = "api"
)

// Origin is where a static pod's manifest was read: a file of the static
// pod directory or the manifest URL.
type Origin struct {
	// Source is FileSource or HTTPSource.
	Source string
	// Location is the file's path or the URL.
	Location string
}

// ApplyStaticDefaults makes a pod read from a manifest into the pod the
// upstream kubelet would run: a UID derived from its content and origin
// (for a file, also the node; unless the manifest sets one), the name
// suffixed with the node name, the default namespace, spec.nodeName, the
// source and hash annotations and, for a file, a toleration of every
// NoExecute taint (upstream gives it to file pods only). It then applies
// the API defaults.
func ApplyStaticDefaults(pod *v1.Pod, from Origin, nodeName string) error {
	if from.Source != FileSource && from.Source != HTTPSource {
		return fmt.Errorf("static pod source %q is neither %q nor %q", from.Source, FileSource, HTTPSource)
	}
	if pod.UID == "" {
		raw, err := json.Marshal(pod)
		if err != nil {
			return err
		}
		h := md5.New() //nolint:gosec
		h.Write(raw)
		if from.Source == FileSource {
			fmt.Fprintf(h, "host:%s", nodeName)
			fmt.Fprintf(h, "file:%s", from.Location)
		} else {
			fmt.Fprintf(h, "url:%s", from.Location)
		}
		pod.UID = types.UID(hex.EncodeToString(h.Sum(nil)))
	}
	pod.Name = pod.Name + "-" + strings.ToLower(nodeName)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[ConfigHashAnnotationKey] = string(pod.UID)
	pod.Annotations[ConfigSourceAnnotationKey] = from.Source
	if from.Source == FileSource {
		addNoExecuteToleration(pod)
	}
	pod.Status = v1.PodStatus{Phase: v1.PodPending}
	SetDefaults(pod)
	return nil
}

func addNoExecuteToleration(pod *v1.Pod) {
	want := v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
	for _, t := range pod.Spec.Tolerations {
		if t.MatchToleration(&want) {
			return
		}
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, want)
}

// IsStatic reports whether a pod came from a manifest (a file or the
// manifest URL) rather than the API server.
func IsStatic(pod *v1.Pod) bool {
	s := pod.Annotations[ConfigSourceAnnotationKey]
	return s == FileSource || s == HTTPSource
}

// SystemCriticalPriority is the priority from which a pod is critical
// (system-cluster-critical and system-node-critical are above it), as
// upstream's scheduling.SystemCriticalPriority.
const SystemCriticalPriority = 2 * 1000 * 1000 * 1000

// IsCritical reports whether the pod is critical to the node, as upstream's
// kubetypes.IsCriticalPod: a static or mirror pod, or one with a
// system-critical priority.
func IsCritical(pod *v1.Pod) bool {
	if IsStatic(pod) {
		return true
	}
	if _, ok := pod.Annotations[ConfigMirrorAnnotationKey]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= SystemCriticalPriority
}

// ContainerHash is upstream's kubecontainer.HashContainer: a digest of the
// fields whose change restarts a running container, the name and the image
// (the rest of a running pod's spec is immutable, but its resources, which
// an in-place resize changes without a restart), in upstream's spelling
// (hexadecimal, unpadded), so that a container started by either agent is
// kept by the other.
func ContainerHash(c *v1.Container) string {
	raw, _ := json.Marshal(map[string]string{"name": c.Name, "image": c.Image})
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(raw))
	return strconv.FormatUint(uint64(h.Sum32()), 16)
}

// LegacyContainerHash is the hash nodelet gave containers before it took
// upstream's: the whole container's JSON. A container started then is
// kept while its spec is unchanged.
func LegacyContainerHash(c *v1.Container) string {
	raw, _ := json.Marshal(c)
	h := fnv.New32a()
	h.Write(raw)
	return fmt.Sprintf("%08x", h.Sum32())
}

// ContainerChanged reports whether a running container whose hash
// annotation is hash was started from another definition than c (an
// unknown hash, "", never counts).
func ContainerChanged(hash string, c *v1.Container) bool {
	return hash != "" && hash != ContainerHash(c) && hash != LegacyContainerHash(c)
}

// FullName is the pod's namespace/name key used in logs and back-off keys.
func FullName(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }
