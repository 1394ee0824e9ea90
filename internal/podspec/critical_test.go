package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Critical pods as upstream's kubetypes.IsCriticalPod: static, mirror, or
// of a system-critical priority.
func TestIsCritical(t *testing.T) {
	prio := func(p int32) *int32 { return &p }
	for _, tt := range []struct {
		name        string
		annotations map[string]string
		priority    *int32
		want        bool
	}{
		{name: "plain pod"},
		{name: "from the API server", annotations: map[string]string{ConfigSourceAnnotationKey: APIServerSource}},
		{name: "static", annotations: map[string]string{ConfigSourceAnnotationKey: FileSource}, want: true},
		{name: "mirror", annotations: map[string]string{ConfigMirrorAnnotationKey: "h"}, want: true},
		{name: "system-critical priority", priority: prio(SystemCriticalPriority), want: true},
		{name: "system-node-critical priority", priority: prio(SystemCriticalPriority + 1000), want: true},
		{name: "just below", priority: prio(SystemCriticalPriority - 1)},
	} {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: tt.annotations}, Spec: v1.PodSpec{Priority: tt.priority}}
		if got := IsCritical(pod); got != tt.want {
			t.Errorf("%s: IsCritical = %v, want %v", tt.name, got, tt.want)
		}
	}
}
