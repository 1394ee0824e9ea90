package podmanager

import (
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/podspec"
)

// Statuses gives the latest status nodelet computed for a pod.
type Statuses interface {
	Get(uid types.UID) (v1.PodStatus, bool)
}

// Workers tells what the pod workers are doing with a pod.
type Workers interface {
	// Live: a worker that has not finished (running or stopping the pod).
	Live(uid types.UID) bool
	// Has: a worker, finished or not, that has not been forgotten.
	Has(uid types.UID) bool
	// Terminating: the worker is stopping the pod.
	Terminating(uid types.UID) bool
}

// Evictions tells which pods were evicted (their containers stopped for
// node pressure or shutdown; podsync).
type Evictions interface {
	Evicted(uid types.UID) bool
}

// ViewConfig is a View's configuration.
type ViewConfig struct {
	// Pods, Statuses and Workers are required.
	Pods     *Manager
	Statuses Statuses
	Workers  Workers
	// Evictions, when set, makes an evicted pod's leftovers removable.
	Evictions Evictions
	// Pending, when set, gives the pods waiting to be admitted (for the
	// Node to be registered): they may hold devices already.
	Pending func() []*v1.Pod
}

// View answers which of the desired pods are active, live, running, known
// or removable, from the pod manager, the statuses and the pod workers: the
// one place each of these questions is answered, for admission, eviction,
// shutdown, the device manager, the pod-resources API, garbage collection
// and housekeeping. Safe for concurrent use.
type View struct {
	cfg ViewConfig
}

// NewView returns the View of cfg.
func NewView(cfg ViewConfig) (*View, error) {
	switch {
	case cfg.Pods == nil:
		return nil, errors.New("podmanager: ViewConfig.Pods is required")
	case cfg.Statuses == nil:
		return nil, errors.New("podmanager: ViewConfig.Statuses is required")
	case cfg.Workers == nil:
		return nil, errors.New("podmanager: ViewConfig.Workers is required")
	}
	return &View{cfg: cfg}, nil
}

// finished: Succeeded or Failed in the API or in the status computed here.
func (v *View) finished(p *v1.Pod) bool {
	if podspec.IsTerminal(p.Status.Phase) {
		return true
	}
	st, ok := v.cfg.Statuses.Get(p.UID)
	return ok && podspec.IsTerminal(st.Phase)
}

// Active are the admitted pods that count against the node's resources
// (not finished), except the one with UID except: the other pods of
// admission.
func (v *View) Active(except types.UID) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range v.cfg.Pods.Admitted(except) {
		if !v.finished(p) {
			out = append(out, p)
		}
	}
	return out
}

// Live are the active pods whose worker has not finished, those being
// stopped included: upstream's active pods for eviction's ranking waits,
// shutdown and the pod-resources API.
func (v *View) Live() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range v.Active("") {
		if v.cfg.Workers.Live(p.UID) {
			out = append(out, p)
		}
	}
	return out
}

// Running are the live pods neither being deleted nor being stopped: those
// eviction may choose from.
func (v *View) Running() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range v.Live() {
		if p.DeletionTimestamp == nil && !v.cfg.Workers.Terminating(p.UID) {
			out = append(out, p)
		}
	}
	return out
}

// ResourceHolders are the pods that may hold what admission assigned
// (devices): the live ones and those waiting to be admitted.
func (v *View) ResourceHolders() []*v1.Pod {
	out := v.Live()
	if v.cfg.Pending != nil {
		out = append(out, v.cfg.Pending()...)
	}
	return out
}

// Known reports whether what a pod left on the node (its directory, logs,
// cgroups) must stay: a source wants it, a worker handles it, or the
// runtime has it (inRuntime, from the last relist).
func (v *View) Known(uid types.UID, inRuntime map[types.UID]bool) bool {
	return inRuntime[uid] || v.Wanted(uid)
}

// Wanted reports whether a source wants the pod (admitted) or a worker
// handles it: a pod the runtime has that is not wanted is stopped.
func (v *View) Wanted(uid types.UID) bool {
	if _, ok := v.cfg.Pods.Get(uid); ok {
		return true
	}
	return v.cfg.Workers.Has(uid)
}

// Removable reports whether all of a pod's dead containers and sandboxes
// may go: it was evicted, or no source wants it and no worker handles it.
// uid is a string: the runtime's labels carry it so.
func (v *View) Removable(uid string) bool {
	id := types.UID(uid)
	if v.cfg.Evictions != nil && v.cfg.Evictions.Evicted(id) {
		return true
	}
	return !v.Wanted(id)
}

// withStatus is p with the latest status computed here, if any.
func (v *View) withStatus(p *v1.Pod) *v1.Pod {
	if st, ok := v.cfg.Statuses.Get(p.UID); ok {
		p = p.DeepCopy()
		p.Status = st
	}
	return p
}

// Pods are the admitted pods with their latest status (the kubelet API's
// /pods).
func (v *View) Pods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range v.cfg.Pods.Admitted("") {
		out = append(out, v.withStatus(p))
	}
	return out
}

// PodByName is an admitted pod with its latest status.
func (v *View) PodByName(namespace, name string) (*v1.Pod, bool) {
	p, ok := v.cfg.Pods.GetByName(namespace, name)
	if !ok {
		return nil, false
	}
	return v.withStatus(p), true
}
