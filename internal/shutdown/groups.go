package shutdown

import (
	"slices"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodelet/nodelet/internal/podspec"
)

// The pod status of a pod stopped for a node shutdown, as upstream.
const (
	Reason  = "Terminated"
	Message = "Pod was terminated in response to imminent node shutdown."
	// NotReadyMessage is the node's Ready condition message meanwhile.
	NotReadyMessage = "node is shutting down"
	// AdmissionReason refuses pods while the node shuts down.
	AdmissionReason  = "NodeShutdown"
	AdmissionMessage = "Pod was rejected as the node is shutting down."
)

// Priorities of upstream's two groups when only shutdownGracePeriod and
// shutdownGracePeriodCriticalPods are set (scheduling's
// DefaultPriorityWhenNoDefaultClassExists and SystemCriticalPriority).
const (
	DefaultPriority  int32 = 0
	CriticalPriority int32 = 2000000000
)

// Group is a priority band: the pods with a priority from Priority up to
// the next group's, stopped together within ShutdownGracePeriodSeconds.
type Group struct {
	kubeletv1beta1.ShutdownGracePeriodByPodPriority
	Pods []*v1.Pod
}

// Periods are the configuration's priority bands, lowest priority first:
// shutdownGracePeriodByPodPriority when set, else upstream's migration of
// shutdownGracePeriod and shutdownGracePeriodCriticalPods (regular pods get
// the difference, critical ones the critical period). None: graceful
// shutdown is off.
func Periods(byPriority []kubeletv1beta1.ShutdownGracePeriodByPodPriority, period, critical time.Duration) []kubeletv1beta1.ShutdownGracePeriodByPodPriority {
	out := slices.Clone(byPriority)
	if len(out) == 0 {
		if period <= 0 || critical < 0 || period < critical {
			return nil
		}
		out = []kubeletv1beta1.ShutdownGracePeriodByPodPriority{
			{Priority: DefaultPriority, ShutdownGracePeriodSeconds: int64((period - critical) / time.Second)},
			{Priority: CriticalPriority, ShutdownGracePeriodSeconds: int64(critical / time.Second)},
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Priority < out[j].Priority })
	return out
}

// Requested is the time to ask of the system (the inhibitor's delay): the
// sum of the groups' periods.
func Requested(periods []kubeletv1beta1.ShutdownGracePeriodByPodPriority) time.Duration {
	var sum int64
	for _, p := range periods {
		sum += p.ShutdownGracePeriodSeconds
	}
	return time.Duration(sum) * time.Second
}

// GroupByPriority puts each pod in its band, as upstream: the highest band
// whose priority is at most the pod's; pods below the lowest band go to
// it, pods above the highest to that one. Groups come lowest priority
// first: the order they are stopped in.
func GroupByPriority(periods []kubeletv1beta1.ShutdownGracePeriodByPodPriority, pods []*v1.Pod) []Group {
	groups := make([]Group, 0, len(periods))
	for _, p := range periods {
		groups = append(groups, Group{ShutdownGracePeriodByPodPriority: p})
	}
	if len(groups) == 0 {
		return nil
	}
	for _, pod := range pods {
		var priority int32
		if pod.Spec.Priority != nil {
			priority = *pod.Spec.Priority
		}
		i := sort.Search(len(groups), func(i int) bool { return groups[i].Priority >= priority })
		switch {
		case i == len(groups):
			i = len(groups) - 1
		case i > 0 && groups[i].Priority > priority:
			i--
		}
		groups[i].Pods = append(groups[i].Pods, pod)
	}
	return groups
}

// PodGracePeriod is the grace period a pod of group g is stopped with: the
// group's, or the pod's own when shorter.
func PodGracePeriod(pod *v1.Pod, g Group) int64 {
	grace := g.ShutdownGracePeriodSeconds
	if own := pod.Spec.TerminationGracePeriodSeconds; own != nil && *own <= grace {
		grace = *own
	}
	return grace
}

// SetStatus is the final status of a pod stopped for the shutdown: Failed
// with reason Terminated and upstream's message, unless its containers all
// exited 0 (Succeeded, without a reason: upstream keeps a reason only with
// the phase it came with); either way the DisruptionTarget condition
// (TerminationByKubelet) of the pod's generation.
func SetStatus(status *v1.PodStatus, generation int64, now time.Time) {
	if status.Phase == v1.PodSucceeded {
		if status.Reason == Reason {
			status.Reason, status.Message = "", ""
		}
	} else {
		status.Phase = v1.PodFailed
		status.Reason, status.Message = Reason, Message
	}
	podspec.SetCondition(status, v1.PodCondition{
		Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet, Message: Message,
		LastTransitionTime: metav1.NewTime(now), ObservedGeneration: generation,
	})
}
