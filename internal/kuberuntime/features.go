package kuberuntime

import (
	"context"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// featuresMaxAge is how long the runtime's handlers and features are
// taken from the last Status answer (upstream refreshes them every 5 s,
// with the runtime's health).
const featuresMaxAge = 5 * time.Second

// RuntimeFeatures are what the runtime says it can do (CRI Status): its
// handlers' features (recursive read-only mounts, user namespaces) and its
// own (supplementalGroupsPolicy). Asked at most every few seconds.
type RuntimeFeatures struct {
	rt interface {
		Status(context.Context, bool) (*runtimeapi.StatusResponse, error)
	}
	clock clock.PassiveClock

	mu       sync.Mutex
	at       time.Time
	handlers []*runtimeapi.RuntimeHandler
	features *runtimeapi.RuntimeFeatures
}

func newRuntimeFeatures(rt interface {
	Status(context.Context, bool) (*runtimeapi.StatusResponse, error)
}, c clock.PassiveClock) *RuntimeFeatures {
	return &RuntimeFeatures{rt: rt, clock: c}
}

// refresh asks the runtime again when the last answer is too old; on an
// error the last answer stays.
func (f *RuntimeFeatures) refresh(ctx context.Context) {
	f.mu.Lock()
	fresh := !f.at.IsZero() && f.clock.Since(f.at) < featuresMaxAge
	f.mu.Unlock()
	if fresh {
		return
	}
	resp, err := f.rt.Status(ctx, false)
	if err != nil {
		klog.FromContext(ctx).V(4).Info("Cannot read the runtime's handlers and features", "err", err)
		return
	}
	f.mu.Lock()
	f.at, f.handlers, f.features = f.clock.Now(), resp.GetRuntimeHandlers(), resp.GetFeatures()
	f.mu.Unlock()
}

// Handler is what the runtime says of one of its handlers; known is false
// when the runtime lists handlers but not this one, or lists none (a
// runtime without the list, as containerd 1.6: nothing is supported).
func (f *RuntimeFeatures) Handler(ctx context.Context, name string) (h *runtimeapi.RuntimeHandlerFeatures, known bool) {
	f.refresh(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rh := range f.handlers {
		if rh.GetName() == name {
			return rh.GetFeatures(), true
		}
	}
	return nil, false
}

// NodeRuntimeHandlers are the runtime's handlers as the Node's
// status.runtimeHandlers, sorted by name, as upstream's RuntimeHandlers
// setter (empty for a runtime that lists none).
func (f *RuntimeFeatures) NodeRuntimeHandlers(ctx context.Context) []v1.NodeRuntimeHandler {
	f.refresh(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]v1.NodeRuntimeHandler, 0, len(f.handlers))
	for _, h := range f.handlers {
		out = append(out, v1.NodeRuntimeHandler{Name: h.GetName(), Features: &v1.NodeRuntimeHandlerFeatures{
			RecursiveReadOnlyMounts: ptr.To(h.GetFeatures().GetRecursiveReadOnlyMounts()),
			UserNamespaces:          ptr.To(h.GetFeatures().GetUserNamespaces()),
		}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NodeFeatures are the runtime's features as the Node's status.features
// (upstream's NodeFeatures setter); nil when the runtime reports none.
func (f *RuntimeFeatures) NodeFeatures(ctx context.Context) *v1.NodeFeatures {
	f.refresh(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.features == nil {
		return nil
	}
	return &v1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(f.features.GetSupplementalGroupsPolicy())}
}

// SupplementalGroupsPolicy reports whether the runtime honours
// supplementalGroupsPolicy (Strict).
func (f *RuntimeFeatures) SupplementalGroupsPolicy(ctx context.Context) bool {
	f.refresh(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.features.GetSupplementalGroupsPolicy()
}

// Handlers are the runtime's handlers as its last Status listed them.
func (f *RuntimeFeatures) Handlers(ctx context.Context) []*runtimeapi.RuntimeHandler {
	f.refresh(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.handlers
}
