package admission

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// recorder is a handler that notes it was asked and answers r.
type recorder struct {
	name  string
	r     Result
	asked *[]string
}

func (h recorder) Admit(_ context.Context, _ Attributes) Result {
	*h.asked = append(*h.asked, h.name)
	return h.r
}

func TestChainOrderAndReasons(t *testing.T) {
	admit := Result{Admit: true}
	refuse := func(reason string) Result { return Result{Reason: reason, Message: reason + " message"} }
	for _, tc := range []struct {
		name      string
		results   []Result // of handlers a, b, c
		phase     v1.PodPhase
		wantAsked []string
		want      Result
	}{
		{name: "all admit", results: []Result{admit, admit, admit}, wantAsked: []string{"a", "b", "c"}, want: admit},
		{name: "the first refusal decides", results: []Result{admit, refuse("Evicted"), refuse("OutOfcpu")},
			wantAsked: []string{"a", "b"}, want: refuse("Evicted")},
		{name: "the last handler refuses", results: []Result{admit, admit, refuse("NodeShutdown")},
			wantAsked: []string{"a", "b", "c"}, want: refuse("NodeShutdown")},
		{name: "a finished pod is not checked", results: []Result{refuse("Evicted"), admit, admit}, phase: v1.PodSucceeded, want: admit},
		{name: "a failed pod is not checked", results: []Result{refuse("Evicted"), admit, admit}, phase: v1.PodFailed, want: admit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked []string
			var handlers []Named
			for i, name := range []string{"a", "b", "c"} {
				handlers = append(handlers, Named{Name: name, Handler: recorder{name: name, r: tc.results[i], asked: &asked}})
			}
			c := NewChain(handlers...)
			var rejected []Result
			c.OnReject(func(_ *v1.Pod, r Result) { rejected = append(rejected, r) })
			p := pod("")
			p.Status.Phase = tc.phase
			got := c.Admit(t.Context(), Attributes{Pod: p})
			if got != tc.want {
				t.Errorf("result %+v, want %+v", got, tc.want)
			}
			if !slices.Equal(asked, tc.wantAsked) {
				t.Errorf("asked %v, want %v", asked, tc.wantAsked)
			}
			switch {
			case tc.want.Admit && len(rejected) > 0:
				t.Errorf("rejection hook ran for an admitted pod: %v", rejected)
			case !tc.want.Admit && (len(rejected) != 1 || rejected[0] != tc.want):
				t.Errorf("rejection hook saw %v, want once %+v", rejected, tc.want)
			}
		})
	}
}

// The predicate handler adds the extra allocatable (devices not yet in the
// Node's status) to the node's, and leaves the Node itself untouched.
func TestPredicatesExtraAllocatable(t *testing.T) {
	n := node()
	delete(n.Status.Allocatable, "example.com/dev")
	n.Status.Allocatable["example.com/other"] = resource.MustParse("1")
	extra := v1.ResourceList{}
	p := Predicates{Node: func() *v1.Node { return n }, Allocatable: func() v1.ResourceList { return extra }}
	a := Attributes{Pod: pod("", dev("2"))}
	// example.com/dev reported nowhere: not checked, as upstream.
	if r := p.Admit(t.Context(), a); !r.Admit {
		t.Errorf("a resource the node does not report: %+v, want admitted", r)
	}
	extra["example.com/dev"] = resource.MustParse("1")
	if r := p.Admit(t.Context(), a); r.Admit || r.Reason != "OutOfexample.com/dev" {
		t.Errorf("2 devices of 1: %+v, want OutOfexample.com/dev", r)
	}
	extra["example.com/dev"] = resource.MustParse("2")
	if r := p.Admit(t.Context(), a); !r.Admit {
		t.Errorf("2 devices of 2: %+v, want admitted", r)
	}
	if _, ok := n.Status.Allocatable["example.com/dev"]; ok {
		t.Error("the extra allocatable was written into the Node")
	}
}

// A pod refused on the node's labels is checked once more against the
// API's Node (the informer's copy may be behind a label set just before);
// a pod refused for resources only is not (no API read).
func TestPredicatesFreshNode(t *testing.T) {
	stale, fresh := node(), node()
	fresh.Labels = map[string]string{"zone": "a"}
	reads := 0
	p := Predicates{Node: func() *v1.Node { return stale }, Fresh: func(context.Context) *v1.Node { reads++; return fresh }}
	selecting := pod("")
	selecting.Spec.NodeSelector = map[string]string{"zone": "a"}
	if r := p.Admit(t.Context(), Attributes{Pod: selecting}); !r.Admit || reads != 1 {
		t.Errorf("a label only the API's Node has: %+v after %d reads, want admitted after 1", r, reads)
	}
	selecting.Spec.NodeSelector = map[string]string{"zone": "b"}
	if r := p.Admit(t.Context(), Attributes{Pod: selecting}); r.Admit || r.Reason != "NodeAffinity" || reads != 2 {
		t.Errorf("a label no Node has: %+v after %d reads, want NodeAffinity after 2", r, reads)
	}
	if r := p.Admit(t.Context(), Attributes{Pod: pod("", dev("3"))}); r.Admit || reads != 2 {
		t.Errorf("too many devices: %+v after %d reads, want refused without reading the Node", r, reads)
	}
}

// Sysctls is a handler of the chain.
var _ Handler = (*Sysctls)(nil)
var _ Handler = Predicates{}
