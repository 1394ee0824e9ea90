package admission

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/podspec"
)

// Attributes is what a handler decides on.
type Attributes struct {
	// Pod is the pod to admit.
	Pod *v1.Pod
	// OtherPods are the pods already admitted that count against the
	// node's resources (not finished), Pod excluded.
	OtherPods []*v1.Pod
	// Operation is what is admitted: a new pod (OperationAdd, the zero
	// value) or an admitted pod's in-place resize (OperationResize).
	Operation Operation
}

// Operation is what admission decides on, as upstream's
// lifecycle.Operation.
type Operation string

// The operations.
const (
	OperationAdd    Operation = ""
	OperationResize Operation = "resize"
)

// Handler decides one aspect of whether a pod may run, as upstream's
// lifecycle.PodAdmitHandler: a Result that does not admit says why.
type Handler interface {
	Admit(ctx context.Context, a Attributes) Result
}

// HandlerFunc is a function that is a Handler.
type HandlerFunc func(ctx context.Context, a Attributes) Result

// Admit calls f.
func (f HandlerFunc) Admit(ctx context.Context, a Attributes) Result { return f(ctx, a) }

// Named is a handler with the name logs give it.
type Named struct {
	Name    string
	Handler Handler
}

// Chain runs its handlers in order; the first that refuses decides, and
// those after it are not asked. Its order is upstream's (NewMainKubelet):
// eviction, sysctls, resource allocation (devices; later the CPU, memory
// and topology managers, DRA), the node's predicates, shutdown.
type Chain struct {
	handlers []Named
	onReject []func(*v1.Pod, Result)
}

// NewChain returns the chain of handlers, in the order given.
func NewChain(handlers ...Named) *Chain {
	return &Chain{handlers: handlers}
}

// OnReject adds what runs when the chain refuses a pod: a handler that
// reserved something for the pod (devices) gives it back there, whichever
// handler refused.
func (c *Chain) OnReject(f func(*v1.Pod, Result)) {
	c.onReject = append(c.onReject, f)
}

// Admit runs the handlers on a. A pod already finished (Succeeded or
// Failed in the API) is admitted without them: it will not run, only its
// status is kept.
func (c *Chain) Admit(ctx context.Context, a Attributes) Result {
	if podspec.IsTerminal(a.Pod.Status.Phase) {
		return Result{Admit: true}
	}
	for _, h := range c.handlers {
		r := h.Handler.Admit(ctx, a)
		if r.Admit {
			continue
		}
		klog.FromContext(ctx).V(2).Info("Admission handler refused the pod", "pod", klog.KObj(a.Pod), "handler", h.Name, "reason", r.Reason, "operation", a.Operation)
		if a.Operation == OperationResize {
			// The pod keeps running with what it has.
			return r
		}
		for _, f := range c.onReject {
			f(a.Pod, r)
		}
		return r
	}
	return Result{Admit: true}
}

// Predicates is the predicate handler, upstream's
// lifecycle.NewPredicateAdmitHandler: the pod against the node (Admit).
type Predicates struct {
	// Node is the node pods are admitted against. Required.
	Node func() *v1.Node
	// Allocatable, when set, is allocatable the Node's status may not
	// carry yet (the device plugins' resources as they are now); it is
	// added to the Node's.
	Allocatable func() v1.ResourceList
	// Preemption, when set, is upstream's admission failure handler: a
	// critical pod refused only for resources is admitted after it
	// evicted the pods that held them.
	Preemption *Preemption
	// Fresh, when set, reads the Node from the API server: a pod refused
	// on the node's labels, taints or name is checked once more against
	// it.
	Fresh func(ctx context.Context) *v1.Node
}

// withAllocatable is node with p.Allocatable's resources added.
func (p Predicates) withAllocatable(node *v1.Node) *v1.Node {
	if p.Allocatable == nil || node == nil {
		return node
	}
	extra := p.Allocatable()
	if len(extra) == 0 {
		return node
	}
	node = node.DeepCopy()
	if node.Status.Allocatable == nil {
		node.Status.Allocatable = v1.ResourceList{}
	}
	for name, q := range extra {
		node.Status.Allocatable[name] = q
	}
	return node
}

// Admit decides on the pod against the node next to the other pods.
func (p Predicates) Admit(ctx context.Context, a Attributes) Result {
	node := p.withAllocatable(p.Node())
	if r := precheck(node, a.Pod); !r.Admit {
		return r
	}
	fails := failures(node, a.Pod, a.OtherPods)
	if p.Fresh != nil && slices.ContainsFunc(fails, func(f failure) bool { return f.insufficient == nil }) {
		// Refused on the node's labels, taints or name: the informer's
		// copy may be behind a change made just before the pod was
		// created; the API's own decides.
		if fresh := p.Fresh(ctx); fresh != nil {
			node = p.withAllocatable(fresh)
			fails = failures(node, a.Pod, a.OtherPods)
		}
	}
	if len(fails) == 0 {
		return Result{Admit: true}
	}
	if p.Preemption == nil || !podspec.IsCritical(a.Pod) {
		return fails[0].Result
	}
	var short []Insufficient
	for _, f := range fails {
		if f.insufficient == nil {
			// Preempting would not help: the first reason that is not a
			// resource decides, as upstream.
			return f.Result
		}
		short = append(short, *f.insufficient)
	}
	if err := p.Preemption.Preempt(ctx, a.Pod, a.OtherPods, short); err != nil {
		klog.FromContext(ctx).Info("Failed to admit pod, unexpected error while attempting to recover from admission failure", "pod", klog.KObj(a.Pod), "err", err)
		return reject(UnexpectedAdmissionError, "Unexpected error while attempting to recover from admission failure: %v", err)
	}
	return Result{Admit: true}
}
