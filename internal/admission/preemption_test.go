package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/podspec"
)

// The pods of upstream's preemption tests (pkg/kubelet/preemption).
func preemptPods() map[string]*v1.Pod {
	mk := func(name, cpu, mem string, guaranteed bool) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
		if cpu != "" {
			r := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
			p.Spec.Containers[0].Resources.Requests = r
			if guaranteed {
				p.Spec.Containers[0].Resources.Limits = r
			}
		}
		return p
	}
	pods := map[string]*v1.Pod{
		"tiny":                    mk("tiny", "1m", "1Mi", false),
		"bestEffort":              mk("bestEffort", "", "", false),
		"clusterCritical":         mk("clusterCritical", "100m", "100Mi", false),
		"nodeCritical":            mk("nodeCritical", "100m", "100Mi", false),
		"burstable":               mk("burstable", "100m", "100Mi", false),
		"guaranteed":              mk("guaranteed", "100m", "100Mi", true),
		"high-request-burstable":  mk("high-request-burstable", "300m", "300Mi", false),
		"high-request-guaranteed": mk("high-request-guaranteed", "300m", "300Mi", true),
	}
	pods["clusterCritical"].Spec.Priority = ptr.To(int32(podspec.SystemCriticalPriority))
	pods["nodeCritical"].Spec.Priority = ptr.To(int32(podspec.SystemCriticalPriority + 100))
	return pods
}

func reqList(cpu, memMi, pods int64) requirements {
	var r requirements
	if cpu > 0 {
		r = append(r, requirement{v1.ResourceCPU, cpu})
	}
	if memMi > 0 {
		r = append(r, requirement{v1.ResourceMemory, memMi << 20})
	}
	if pods > 0 {
		r = append(r, requirement{v1.ResourcePods, pods})
	}
	return r
}

func names(pods []*v1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// upstream's TestGetPodsToPreempt, case for case.
func TestToPreempt(t *testing.T) {
	all := preemptPods()
	tests := []struct {
		name      string
		preemptor string
		pods      []string
		reqs      requirements
		want      []string // nil: an error
	}{
		{"no requirements", "clusterCritical", nil, reqList(0, 0, 0), []string{}},
		{"no pods", "clusterCritical", nil, reqList(0, 0, 1), nil},
		{"equal pods and resources requirements", "clusterCritical", []string{"burstable"}, reqList(100, 100, 1), []string{"burstable"}},
		{"higher requirements than pod requests", "clusterCritical", []string{"burstable"}, reqList(200, 200, 2), nil},
		{"choose between bestEffort and burstable", "clusterCritical", []string{"burstable", "bestEffort"}, reqList(0, 0, 1), []string{"bestEffort"}},
		{"choose between burstable and guaranteed", "clusterCritical", []string{"burstable", "guaranteed"}, reqList(0, 0, 1), []string{"burstable"}},
		{"choose lower request burstable if it meets requirements", "clusterCritical",
			[]string{"bestEffort", "high-request-burstable", "burstable"}, reqList(100, 100, 0), []string{"burstable"}},
		{"choose higher request burstable if lower does not meet requirements", "clusterCritical",
			[]string{"bestEffort", "burstable", "high-request-burstable"}, reqList(150, 150, 0), []string{"high-request-burstable"}},
		{"multiple pods required", "clusterCritical",
			[]string{"bestEffort", "burstable", "high-request-burstable", "guaranteed", "high-request-guaranteed"}, reqList(350, 350, 0),
			[]string{"burstable", "high-request-burstable"}},
		{"evict guaranteed when we have to, and dont evict the extra burstable", "clusterCritical",
			[]string{"bestEffort", "burstable", "high-request-burstable", "guaranteed", "high-request-guaranteed"}, reqList(0, 550, 0),
			[]string{"high-request-burstable", "high-request-guaranteed"}},
		{"evict cluster critical pod for node critical pod", "nodeCritical", []string{"clusterCritical"}, reqList(100, 0, 0), []string{"clusterCritical"}},
		{"can not evict node critical pod for cluster critical pod", "clusterCritical", []string{"nodeCritical"}, reqList(100, 0, 0), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pods []*v1.Pod
			for _, n := range tc.pods {
				pods = append(pods, all[n])
			}
			got, err := toPreempt(all[tc.preemptor], pods, tc.reqs)
			switch {
			case tc.want == nil && err == nil:
				t.Fatalf("toPreempt = %v, want an error", names(got))
			case tc.want != nil && err != nil:
				t.Fatalf("toPreempt: %v", err)
			case tc.want != nil:
				g := names(got)
				slices.Sort(g)
				w := slices.Clone(tc.want)
				slices.Sort(w)
				if !slices.Equal(g, w) {
					t.Errorf("toPreempt = %v, want %v", g, w)
				}
			}
		})
	}
}

// upstream's TestAdmissionRequirementsDistance and Subtract.
func TestRequirementsDistanceAndSubtract(t *testing.T) {
	all := preemptPods()
	for _, tc := range []struct {
		reqs requirements
		pod  string
		dist float64
	}{
		{reqList(0, 0, 0), "bestEffort", 0},
		{reqList(0, 0, 0), "burstable", 0},
		{reqList(100, 100, 0), "burstable", 0},
		{reqList(200, 200, 0), "burstable", 0.5},
		{reqList(150, 150, 0), "burstable", 2.0 / 9},
		{reqList(0, 0, 1), "burstable", 0},
	} {
		if d := tc.reqs.distance(all[tc.pod]); fmt.Sprintf("%.6f", d) != fmt.Sprintf("%.6f", tc.dist) {
			t.Errorf("%v.distance(%s) = %v, want %v", tc.reqs, tc.pod, d, tc.dist)
		}
	}
	for _, tc := range []struct {
		reqs requirements
		pods []string
		want requirements
	}{
		{reqList(0, 0, 0), []string{"bestEffort"}, nil},
		{reqList(0, 0, 1), []string{"bestEffort"}, nil},
		{reqList(100, 100, 1), []string{"burstable"}, nil},
		{reqList(200, 200, 0), []string{"burstable"}, reqList(100, 100, 0)},
		{reqList(200, 200, 2), []string{"burstable", "burstable"}, nil},
		{reqList(500, 500, 0), []string{"burstable", "high-request-burstable"}, reqList(100, 100, 0)},
	} {
		var pods []*v1.Pod
		for _, n := range tc.pods {
			pods = append(pods, all[n])
		}
		if got := tc.reqs.subtract(pods...); got.String() != tc.want.String() {
			t.Errorf("%v.subtract(%v) = %v, want %v", tc.reqs, tc.pods, got, tc.want)
		}
	}
}

// killer stops pods at once, or never (hang).
type killer struct {
	mu     sync.Mutex
	hang   bool
	killed []string
	status map[string]v1.PodStatus
}

func (k *killer) Evict(_ context.Context, p *v1.Pod, grace int64, status func(*v1.PodStatus)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var st v1.PodStatus
	status(&st)
	k.killed = append(k.killed, fmt.Sprintf("%s/%d", p.Name, grace))
	if k.status == nil {
		k.status = map[string]v1.PodStatus{}
	}
	k.status[p.Name] = st
}

func (k *killer) Reclaimed(uid types.UID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return !k.hang && slices.ContainsFunc(k.killed, func(s string) bool { return strings.HasPrefix(s, string(uid)+"/") })
}

// The predicates with preemption: a critical pod short only of resources
// evicts others and is admitted; anything else stands.
func TestPredicatesPreempt(t *testing.T) {
	all := preemptPods()
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "dedicated", Effect: v1.TaintEffectNoExecute}}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"),
			v1.ResourceMemory: resource.MustParse("500Mi"), v1.ResourcePods: resource.MustParse("10")}}}
	tolerate := func(p *v1.Pod) *v1.Pod {
		p = p.DeepCopy()
		p.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpExists}}
		return p
	}
	critical := tolerate(all["clusterCritical"])
	critical.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("150m"), v1.ResourceMemory: resource.MustParse("100Mi")}
	others := []*v1.Pod{all["bestEffort"], all["burstable"], all["high-request-guaranteed"]}
	static := tolerate(all["burstable"])
	static.Name, static.UID = "static", "static"
	static.Annotations = map[string]string{podspec.ConfigSourceAnnotationKey: podspec.FileSource}
	static.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("150m")
	untolerated := critical.DeepCopy()
	untolerated.Spec.Tolerations = nil
	needsGuaranteed := critical.DeepCopy()
	needsGuaranteed.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("350m")
	huge := critical.DeepCopy()
	huge.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("1")

	tests := []struct {
		name           string
		pod            *v1.Pod
		hang           bool
		reason, prefix string
		killed         []string
	}{
		{name: "a pod that is not critical is refused", pod: tolerate(all["high-request-burstable"]), reason: "OutOfcpu",
			prefix: "Node didn't have enough resource: cpu, requested: 300, used: 400, capacity: 500"},
		{name: "a critical pod evicts the Burstable pod it needs", pod: critical, killed: []string{"burstable/30"}},
		{name: "a static pod is critical and not checked against taints", pod: static, killed: []string{"burstable/30"}},
		{name: "a critical pod that also fails a taint is refused for the taint", pod: untolerated, reason: "TaintToleration",
			prefix: "Predicate TaintToleration failed"},
		{name: "nothing frees enough", pod: huge, reason: UnexpectedAdmissionError,
			prefix: "Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [(res: cpu, q: 500), ]"},
		{name: "Guaranteed pods only when the others do not free enough", pod: needsGuaranteed, killed: []string{"high-request-guaranteed/30"}},
		{name: "a pod that does not stop in time: admitted after the wait", pod: critical, hang: true, killed: []string{"burstable/30"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := &killer{hang: tc.hang}
				rec := record.NewFakeRecorder(10)
				pre, err := NewPreemption(PreemptionConfig{Killer: k, Recorder: rec})
				if err != nil {
					t.Fatal(err)
				}
				p := Predicates{Node: func() *v1.Node { return n }, Preemption: pre}
				start := time.Now()
				r := p.Admit(t.Context(), Attributes{Pod: tc.pod, OtherPods: others})
				if tc.reason != "" {
					if r.Admit || r.Reason != tc.reason || !strings.HasPrefix(r.Message, tc.prefix) {
						t.Fatalf("Admit = %+v, want %s: %s...", r, tc.reason, tc.prefix)
					}
				} else if !r.Admit {
					t.Fatalf("Admit = %+v, want admitted", r)
				}
				if !slices.Equal(k.killed, tc.killed) {
					t.Fatalf("killed %v, want %v", k.killed, tc.killed)
				}
				if len(tc.killed) == 0 {
					return
				}
				if waited, want := time.Since(start), map[bool]time.Duration{false: 0, true: 45 * time.Second}[tc.hang]; waited != want {
					t.Errorf("waited %v for the pods to stop, want %v", waited, want)
				}
				st := k.status[strings.Split(tc.killed[0], "/")[0]]
				if st.Phase != v1.PodFailed || st.Reason != "Preempting" || st.Message != "Preempted in order to admit critical pod" ||
					len(st.Conditions) != 1 || st.Conditions[0].Type != v1.DisruptionTarget || st.Conditions[0].Reason != "TerminationByKubelet" ||
					st.Conditions[0].Message != "Pod was preempted by Kubelet to accommodate a critical pod." {
					t.Errorf("preempted pod's status %+v", st)
				}
				if e := <-rec.Events; e != "Warning Preempting Preempted in order to admit critical pod" {
					t.Errorf("event %q", e)
				}
			})
		})
	}
}
