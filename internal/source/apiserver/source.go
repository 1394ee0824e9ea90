package apiserver

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/nodelet/nodelet/internal/apiclient"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/podspec"
)

// Op is the kind of an Update.
type Op int

const (
	// Set replaces every pod of the source.
	Set Op = iota
	Add
	Update
	Delete
)

// Event is one change of the source.
type Event struct {
	Op   Op
	Pods []*v1.Pod
}

// Source watches the pods bound to a node.
type Source struct {
	informer cache.SharedIndexInformer
	lister   corelisters.PodLister
	synced   cache.InformerSynced
	events   chan Event
	mirrors  chan *v1.Pod
	// logger is Run's, for the informer's event handlers, which have no
	// context: set by Run before it starts the informer.
	logger klog.Logger
	// mu orders the first Set before every event the handlers forward:
	// until Run sent it (setSent) they drop what they get, which the Set
	// has (the informer updates its store before it notifies them), and
	// they wait while Run lists the store and sends it. The informer's
	// HasSynced is not enough: it turns true before the handlers got the
	// initial list's notifications.
	mu      sync.Mutex
	setSent bool
}

// Config configures a Source.
type Config struct {
	// Client watches the pods.
	Client apiclient.Interface
	// NodeName is the node whose pods are watched.
	NodeName string
}

// New returns a Source for the pods bound to cfg.NodeName. It fails when
// cfg has no Client or NodeName.
func New(cfg Config) (*Source, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("apiserver: Config.Client is required")
	case cfg.NodeName == "":
		return nil, errors.New("apiserver: Config.NodeName is required")
	}
	selector := fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
	pods := cfg.Client.CoreV1().Pods("")
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return patiently(ctx, func() (runtime.Object, error) { return pods.List(ctx, o) })
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return patiently(ctx, func() (watch.Interface, error) { return pods.Watch(ctx, o) })
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, cfg.Client), &v1.Pod{},
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
	s := &Source{
		informer: inf,
		lister:   corelisters.NewPodLister(inf.GetIndexer()),
		synced:   inf.HasSynced,
		events:   make(chan Event, 1000),
		mirrors:  make(chan *v1.Pod, 100),
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { s.onAdd(obj.(*v1.Pod)) },
		UpdateFunc: func(old, cur any) {
			s.onUpdate(old.(*v1.Pod), cur.(*v1.Pod))
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if p, ok := obj.(*v1.Pod); ok {
				s.onDelete(p)
			}
		},
	})
	return s, nil
}

// retryPeriod is how often a list or watch the API server did not answer is
// tried again (with up to 100% jitter).
const retryPeriod = time.Second

// patiently calls f until the API server answers it (an error it returns
// counts) or ctx is done, every retryPeriod: the reflector's own back-off
// (up to a minute, for answers such as 429 or 5xx that say the API server
// is busy) does not grow while the API server is merely gone, so nodelet
// reconnects within a couple of seconds of its return rather than up to a
// minute later. A refused connection costs the API server nothing.
func patiently[T any](ctx context.Context, f func() (T, error)) (T, error) {
	for {
		v, err := f()
		var st apierrors.APIStatus
		if err == nil || errors.As(err, &st) || ctx.Err() != nil {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait.Jitter(retryPeriod, 1)):
		}
	}
}

// Events returns the channel of pod changes.
func (s *Source) Events() <-chan Event { return s.events }

// Mirrors returns the channel of mirror pods that changed or were deleted.
func (s *Source) Mirrors() <-chan *v1.Pod { return s.mirrors }

// Lister lists the pods bound to the node, mirror pods included.
func (s *Source) Lister() corelisters.PodLister { return s.lister }

// Run starts the informer and sends the first full set once it synced. It
// keeps retrying while the API server is unreachable. Everything the
// Source logs, the informer's event handlers included, goes to ctx's
// logger.
func (s *Source) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	s.logger = logger
	go s.informer.Run(ctx.Done())
	for !cache.WaitForCacheSync(ctx.Done(), s.synced) {
		if ctx.Err() != nil {
			return nil
		}
	}
	s.sendSet(logger)
	<-ctx.Done()
	return nil
}

// sendSet sends the first Set, the non-mirror pods of the informer's store;
// the handlers only forward events after it.
func (s *Source) sendSet(logger klog.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pods, err := s.lister.List(everything)
	if err != nil {
		logger.Error(err, "Listing pods from the informer cache")
	}
	var set []*v1.Pod
	for _, p := range pods {
		if !IsMirror(p) {
			set = append(set, fromAPI(p))
		}
	}
	s.send(Event{Op: Set, Pods: set})
	s.setSent = true
}

// started reports whether the first Set was sent (waiting while it is).
func (s *Source) started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setSent
}

func (s *Source) send(e Event) {
	select {
	case s.events <- e:
	case <-time.After(10 * time.Second):
		s.logger.Error(nil, "API pod source: the consumer is stuck; dropping an event")
	}
}

func (s *Source) onAdd(p *v1.Pod) {
	if !s.started() {
		return // part of the first Set
	}
	if IsMirror(p) {
		s.mirror(p)
		return
	}
	s.send(Event{Op: Add, Pods: []*v1.Pod{fromAPI(p)}})
}

func (s *Source) onUpdate(old, cur *v1.Pod) {
	if !s.started() {
		return
	}
	if IsMirror(cur) {
		if cur.DeletionTimestamp != nil || !apiequality.Semantic.DeepEqual(old.Annotations, cur.Annotations) {
			s.mirror(cur)
		}
		return
	}
	if !specChanged(old, cur) && !podspec.GatesChanged(old, cur) {
		return
	}
	s.send(Event{Op: Update, Pods: []*v1.Pod{fromAPI(cur)}})
}

func (s *Source) onDelete(p *v1.Pod) {
	if !s.started() {
		return
	}
	if IsMirror(p) {
		s.mirror(p)
		return
	}
	s.send(Event{Op: Delete, Pods: []*v1.Pod{fromAPI(p)}})
}

// fromAPI is the pod as the node sees it: annotated with its source
// (kubernetes.io/config.source: api), as upstream's pod config does for
// every source, so that a pod whose author wrote "file" there is not taken
// for a static pod. The informer's object is not changed; the copy shares
// everything but the annotations.
func fromAPI(p *v1.Pod) *v1.Pod {
	cp := *p
	cp.Annotations = maps.Clone(p.Annotations)
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	cp.Annotations[podspec.ConfigSourceAnnotationKey] = podspec.APIServerSource
	return &cp
}

func (s *Source) mirror(p *v1.Pod) {
	select {
	case s.mirrors <- p:
	default:
	}
}

// specChanged reports whether an update matters to the node: anything but
// status, resource version and managed fields.
func specChanged(old, cur *v1.Pod) bool {
	if !apiequality.Semantic.DeepEqual(old.Spec, cur.Spec) {
		return true
	}
	a, b := old.ObjectMeta, cur.ObjectMeta
	a.ResourceVersion, b.ResourceVersion = "", ""
	a.ManagedFields, b.ManagedFields = nil, nil
	a.Generation, b.Generation = 0, 0
	return !apiequality.Semantic.DeepEqual(a, b)
}

// IsMirror reports whether p is the API copy of a static pod.
func IsMirror(p *v1.Pod) bool {
	_, ok := p.Annotations[podspec.ConfigMirrorAnnotationKey]
	return ok
}
