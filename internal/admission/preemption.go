package admission

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/podspec"
)

const (
	// UnexpectedAdmissionError is the reason of a pod whose admission
	// failure could not be recovered from (a critical pod with nothing to
	// preempt), as upstream.
	UnexpectedAdmissionError = "UnexpectedAdmissionError"
	// ReasonPreempting is the reason, in their status and event, of the
	// pods evicted to admit a critical pod (upstream's events.PreemptContainer).
	ReasonPreempting = "Preempting"
	// preemptMessage and preemptCondition are upstream's messages.
	preemptMessage   = "Preempted in order to admit critical pod"
	preemptCondition = "Pod was preempted by Kubelet to accommodate a critical pod."
	// minKillWait is the least time a preemption waits for a pod to stop,
	// as upstream's killPodNow (otherwise one and a half grace periods).
	minKillWait = 10 * time.Second
	// killPoll is how often the preemption looks whether its pods stopped.
	killPoll = 100 * time.Millisecond
)

// Killer stops pods for the preemption: the pod workers (the eviction
// manager's Evictor).
type Killer interface {
	// Evict stops the pod within grace seconds and reports it with status
	// applied; it does not wait.
	Evict(ctx context.Context, pod *v1.Pod, grace int64, status func(*v1.PodStatus))
	// Reclaimed reports whether an evicted pod's containers are gone.
	Reclaimed(uid types.UID) bool
}

// PreemptionConfig is what a Preemption needs.
type PreemptionConfig struct {
	// Killer stops the preempted pods. Required.
	Killer Killer
	// Recorder records the Preempting events on them. Required.
	Recorder record.EventRecorder
	// Clock times the wait for them to stop; defaults to the real clock.
	Clock clock.WithTicker
}

// Preemption is upstream's CriticalPodAdmissionHandler: a critical pod
// (static, mirror, or of system-critical priority) refused only because
// the node lacks resources evicts pods it may preempt (not critical, or of
// a lower priority) that hold them, and is admitted. The pods are chosen
// to disturb the least: Guaranteed pods only as far as the BestEffort and
// Burstable ones would not do, Burstable only as far as BestEffort would
// not, and within a class the pods closest to what is missing.
type Preemption struct {
	cfg PreemptionConfig
}

// NewPreemption validates cfg.
func NewPreemption(cfg PreemptionConfig) (*Preemption, error) {
	switch {
	case cfg.Killer == nil:
		return nil, errors.New("admission: PreemptionConfig.Killer is required")
	case cfg.Recorder == nil:
		return nil, errors.New("admission: PreemptionConfig.Recorder is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Preemption{cfg: cfg}, nil
}

// Preempt evicts pods among others to free what pod is short of, and waits
// for them to stop (up to one and a half grace periods, at least 10 s, as
// upstream's kill; a pod that does not stop in time is logged and the
// critical pod admitted anyway). An error says no set of pods frees enough.
func (p *Preemption) Preempt(ctx context.Context, pod *v1.Pod, others []*v1.Pod, short []Insufficient) error {
	logger := klog.FromContext(ctx)
	reqs := make(requirements, 0, len(short))
	for _, s := range short {
		reqs = append(reqs, requirement{name: s.Resource, quantity: s.Short()})
	}
	victims, err := toPreempt(pod, others, reqs)
	if err != nil {
		return fmt.Errorf("preemption: error finding a set of pods to preempt: %w", err)
	}
	wait := time.Duration(0)
	for _, v := range victims {
		p.cfg.Recorder.Eventf(v, v1.EventTypeWarning, ReasonPreempting, preemptMessage)
		logger.Info("Preempting pod to free up resources", "pod", klog.KObj(v), "podUID", v.UID,
			"insufficientResources", reqs.String(), "requestingPod", klog.KObj(pod))
		grace := gracePeriod(v)
		p.cfg.Killer.Evict(ctx, v, grace, func(st *v1.PodStatus) {
			st.Phase, st.Reason, st.Message = v1.PodFailed, ReasonPreempting, preemptMessage
			podspec.SetCondition(st, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, ObservedGeneration: v.Generation,
				Reason: v1.PodReasonTerminationByKubelet, Message: preemptCondition})
		})
		wait = max(wait, killWait(grace))
	}
	stopped := p.waitStopped(ctx, victims, wait)
	for _, v := range victims {
		if !stopped[v.UID] {
			logger.Error(errors.New("timeout waiting to kill pod"), "Failed to evict pod", "pod", klog.KObj(v))
			continue
		}
		signal := ""
		if len(reqs) > 0 {
			signal = string(reqs[0].name)
		}
		metrics.Preemptions.WithLabelValues(signal).Inc()
		logger.Info("Pod evicted successfully", "pod", klog.KObj(v))
	}
	return nil
}

// gracePeriod is the pod's own: its deletion's when it is being deleted,
// else its spec's (30 s when unset), as upstream's kill without override.
func gracePeriod(p *v1.Pod) int64 {
	switch {
	case p.DeletionGracePeriodSeconds != nil:
		return *p.DeletionGracePeriodSeconds
	case p.Spec.TerminationGracePeriodSeconds != nil:
		return *p.Spec.TerminationGracePeriodSeconds
	}
	return v1.DefaultTerminationGracePeriodSeconds
}

// killWait is how long upstream's kill waits for a pod of that grace
// period to stop.
func killWait(grace int64) time.Duration {
	return max(time.Duration(grace+grace/2)*time.Second, minKillWait)
}

// waitStopped waits until every victim is reclaimed or the time is up; it
// returns those that were.
func (p *Preemption) waitStopped(ctx context.Context, victims []*v1.Pod, wait time.Duration) map[types.UID]bool {
	stopped := map[types.UID]bool{}
	timeout := p.cfg.Clock.NewTimer(wait)
	defer timeout.Stop()
	tick := p.cfg.Clock.NewTicker(killPoll)
	defer tick.Stop()
	for {
		for _, v := range victims {
			if !stopped[v.UID] && p.cfg.Killer.Reclaimed(v.UID) {
				stopped[v.UID] = true
			}
		}
		if len(stopped) == len(victims) {
			return stopped
		}
		select {
		case <-ctx.Done():
			return stopped
		case <-timeout.C():
			return stopped
		case <-tick.C():
		}
	}
}

// requirement is an amount of a resource still to free: cpu in
// millicores, the others in units.
type requirement struct {
	name     v1.ResourceName
	quantity int64
}

type requirements []requirement

// String is upstream's toString, for logs and errors.
func (r requirements) String() string {
	var b strings.Builder
	b.WriteString("[")
	for _, q := range r {
		fmt.Fprintf(&b, "(res: %v, q: %d), ", q.name, q.quantity)
	}
	b.WriteString("]")
	return b.String()
}

// request is upstream's resource.GetResourceRequest: one for pods,
// millicores for cpu, units otherwise.
func request(pod *v1.Pod, name v1.ResourceName) int64 {
	if name == v1.ResourcePods {
		return 1
	}
	q := PodRequests(pod)[name]
	return amount(name, q)
}

// subtract is what remains to free once pods are evicted.
func (r requirements) subtract(pods ...*v1.Pod) requirements {
	var out requirements
	for _, req := range r {
		left := req.quantity
		for _, p := range pods {
			left -= request(p, req.name)
			if left <= 0 {
				break
			}
		}
		if left > 0 {
			out = append(out, requirement{name: req.name, quantity: left})
		}
	}
	return out
}

// distance is how far evicting pod leaves r from being met: the sum of
// the squares of the fractions of each requirement it does not cover.
func (r requirements) distance(pod *v1.Pod) float64 {
	d := 0.0
	for _, req := range r {
		if left := float64(req.quantity - request(pod, req.name)); left > 0 {
			d += math.Pow(left/float64(req.quantity), 2)
		}
	}
	return d
}

// preemptable is upstream's kubetypes.Preemptable: a critical pod may
// preempt any pod that is not, and a pod one of a lower priority.
func preemptable(preemptor, preemptee *v1.Pod) bool {
	if podspec.IsCritical(preemptor) && !podspec.IsCritical(preemptee) {
		return true
	}
	if preemptor.Spec.Priority != nil && preemptee.Spec.Priority != nil {
		return *preemptor.Spec.Priority > *preemptee.Spec.Priority
	}
	return false
}

// byQOS are the pods preemptor may preempt, by QoS class: BestEffort,
// Burstable, Guaranteed (upstream's sortPodsByQOS).
func byQOS(preemptor *v1.Pod, pods []*v1.Pod) (bestEffort, burstable, guaranteed []*v1.Pod) {
	for _, p := range pods {
		if !preemptable(preemptor, p) {
			continue
		}
		switch podspec.QOSClass(p) {
		case v1.PodQOSBestEffort:
			bestEffort = append(bestEffort, p)
		case v1.PodQOSBurstable:
			burstable = append(burstable, p)
		case v1.PodQOSGuaranteed:
			guaranteed = append(guaranteed, p)
		}
	}
	return bestEffort, burstable, guaranteed
}

// toPreempt chooses the pods to evict so that reqs are met, as upstream's
// getPodsToPreempt: the Guaranteed pods needed were every BestEffort and
// Burstable pod evicted, then the Burstable pods needed were every
// BestEffort pod and those Guaranteed ones evicted, then the BestEffort
// pods still needed.
func toPreempt(preemptor *v1.Pod, pods []*v1.Pod, reqs requirements) ([]*v1.Pod, error) {
	bestEffort, burstable, guaranteed := byQOS(preemptor, pods)
	all := slices.Concat(bestEffort, burstable, guaranteed)
	if left := reqs.subtract(all...); len(left) > 0 {
		return nil, fmt.Errorf("no set of running pods found to reclaim resources: %v", left)
	}
	g, err := byDistance(guaranteed, reqs.subtract(slices.Concat(bestEffort, burstable)...))
	if err != nil {
		return nil, err
	}
	bu, err := byDistance(burstable, reqs.subtract(slices.Concat(bestEffort, g)...))
	if err != nil {
		return nil, err
	}
	be, err := byDistance(bestEffort, reqs.subtract(slices.Concat(bu, g)...))
	if err != nil {
		return nil, err
	}
	return slices.Concat(be, bu, g), nil
}

// byDistance picks pods one by one, each time the one that leaves reqs
// the closest to met (the smaller request on a tie), until they are met
// (upstream's getPodsToPreemptByDistance).
func byDistance(pods []*v1.Pod, reqs requirements) ([]*v1.Pod, error) {
	var out []*v1.Pod
	for len(reqs) > 0 {
		if len(pods) == 0 {
			return nil, fmt.Errorf("no set of running pods found to reclaim resources: %v", reqs)
		}
		best, bestDist := 0, float64(len(reqs)+1)
		for i, p := range pods {
			d := reqs.distance(p)
			if d < bestDist || (d == bestDist && smallerRequest(p, pods[best])) {
				best, bestDist = i, d
			}
		}
		reqs = reqs.subtract(pods[best])
		out = append(out, pods[best])
		pods[best] = pods[len(pods)-1]
		pods = pods[:len(pods)-1]
	}
	return out, nil
}

// smallerRequest reports whether a asks for less than b: memory first,
// then cpu; equal counts as smaller, as upstream.
func smallerRequest(a, b *v1.Pod) bool {
	for _, name := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU} {
		ra, rb := request(a, name), request(b, name)
		if ra != rb {
			return ra < rb
		}
	}
	return true
}
