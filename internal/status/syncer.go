package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/nodelet/nodelet/internal/apiclient"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/apiutil"
	"github.com/nodelet/nodelet/internal/podspec"
)

// Syncer writes the statuses of a Store to the API server: PATCH
// pods/status (the node identity may not GET it), with the pod's UID as a
// precondition, computed against the status the informer last saw. A
// change after a quiet spell is written at once (a restarted container is
// in the API as soon as the runtime started it); changes that follow a
// write within the window are gathered until it ends, so a pod that changes
// ten times in that window costs one request, and a burst's statuses go out
// in batches. Static pods' statuses go to their mirror pods.
type Syncer struct {
	client apiclient.Interface
	lister corelisters.PodLister
	store  *Store
	clock  clock.Clock
	window time.Duration
	resync time.Duration
	hold   func(uid types.UID) bool // HoldTerminal

	// agreed: per pod, the store's status version and the API pod's
	// resourceVersion at which the API last had that status (compared or
	// written): while neither changed, the resync has nothing to compare.
	mu     sync.Mutex
	agreed map[types.UID]agreement
}

type agreement struct {
	version         uint64
	resourceVersion string
}

// SyncerConfig configures a Syncer.
type SyncerConfig struct {
	// Client writes the statuses.
	Client apiclient.Interface
	// Lister gives the pods as the informer last saw them, which the
	// patches are computed against.
	Lister corelisters.PodLister
	// Store holds the statuses to write.
	Store *Store
	// Clock times the window and the resync (the real clock when nil).
	Clock clock.Clock
	// Window is the least time between the end of one round of writes and
	// the start of the next: changes within it are gathered (100 ms when
	// 0).
	Window time.Duration
	// Resync is how often every pod's status is compared with the API's,
	// catching writes that failed or mirror pods that appeared later (10 s
	// when 0).
	Resync time.Duration
	// HoldTerminal reports whether the pod still holds what only the node
	// releases (ResourceClaims its DRA drivers prepared): its terminal
	// phase waits, as upstream's mergePodStatus, lest the claims be
	// deallocated and given to another pod while still prepared here.
	// Nil: never.
	HoldTerminal func(uid types.UID) bool
}

// NewSyncer returns a Syncer for cfg. It fails when cfg has no Client,
// Lister or Store.
func NewSyncer(cfg SyncerConfig) (*Syncer, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("status: SyncerConfig.Client is required")
	case cfg.Lister == nil:
		return nil, errors.New("status: SyncerConfig.Lister is required")
	case cfg.Store == nil:
		return nil, errors.New("status: SyncerConfig.Store is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Window == 0 {
		cfg.Window = 100 * time.Millisecond
	}
	if cfg.Resync == 0 {
		cfg.Resync = 10 * time.Second
	}
	return &Syncer{client: cfg.Client, lister: cfg.Lister, store: cfg.Store, clock: cfg.Clock, window: cfg.Window, resync: cfg.Resync,
		hold: cfg.HoldTerminal, agreed: map[types.UID]agreement{}}, nil
}

// Run writes statuses until ctx is done.
func (s *Syncer) Run(ctx context.Context) error {
	resync := s.clock.NewTimer(s.resync)
	defer resync.Stop()
	var last time.Time // when the last round of writes ended
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.store.Changed():
			if wait := holdFor(s.window, last, s.clock.Now()); wait > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-s.clock.After(wait):
				}
			}
		case <-resync.C():
			s.store.markAllDirty()
			resync.Reset(s.resync)
			dirty := s.store.TakeDirty() // every pod the store has
			s.forgetGone(dirty)
			s.writeAll(ctx, dirty)
			last = s.clock.Now()
			continue
		}
		s.writeAll(ctx, s.store.TakeDirty())
		last = s.clock.Now()
	}
}

// holdFor is how long a change seen at now waits before it is written: not
// at all after a quiet spell of a window since the last round of writes
// ended (or before the first), else the rest of that window.
func holdFor(window time.Duration, last, now time.Time) time.Duration {
	if last.IsZero() {
		return 0
	}
	return max(0, window-now.Sub(last))
}

// writers is how many status writes are in flight at once: the client's
// rate limit (kubeAPIQPS) still applies, but one slow request no longer
// holds up every other pod's status.
const writers = 4

// writeAll writes the dirty statuses, those that report a started pod
// (phase past Pending) first: under a burst, the writes the client's rate
// limit delays are the Pending ones nobody waits for.
func (s *Syncer) writeAll(ctx context.Context, dirty map[types.UID]entry) {
	order := make([]types.UID, 0, len(dirty))
	for uid := range dirty {
		order = append(order, uid)
	}
	pending := func(uid types.UID) bool { return dirty[uid].status.Phase == v1.PodPending }
	sort.SliceStable(order, func(i, j int) bool { return !pending(order[i]) && pending(order[j]) })
	work := make(chan types.UID)
	var wg sync.WaitGroup
	for i := 0; i < min(writers, len(order)); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for uid := range work {
				e := dirty[uid]
				if err := s.write(ctx, e.pod, e.status, e.version); err != nil {
					// The periodic resync writes it again.
					klog.FromContext(ctx).Error(err, "Failed to update pod status; will retry", "pod", klog.KObj(e.pod), "podUID", uid)
				}
			}
		}()
	}
	for _, uid := range order {
		work <- uid
	}
	close(work)
	wg.Wait()
}

// apiPod returns the API object the pod's status belongs to: the pod
// itself, or a static pod's mirror pod.
func (s *Syncer) apiPod(pod *v1.Pod) (*v1.Pod, error) {
	cur, err := s.lister.Pods(pod.Namespace).Get(pod.Name)
	if err != nil {
		return nil, err
	}
	if podspec.IsStatic(pod) {
		if _, ok := cur.Annotations[podspec.ConfigMirrorAnnotationKey]; !ok {
			return nil, apierrors.NewNotFound(v1.Resource("pods"), pod.Name)
		}
		return cur, nil
	}
	if cur.UID != pod.UID {
		return nil, apierrors.NewNotFound(v1.Resource("pods"), pod.Name)
	}
	return cur, nil
}

// forgetGone drops the agreements of pods the store no longer has.
func (s *Syncer) forgetGone(all map[types.UID]entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid := range s.agreed {
		if _, ok := all[uid]; !ok {
			delete(s.agreed, uid)
		}
	}
}

// write patches one pod's status if the API's differs. version is st's in
// the store (0: not from the store, always compared).
func (s *Syncer) write(ctx context.Context, pod *v1.Pod, st v1.PodStatus, version uint64) error {
	cur, err := s.apiPod(pod)
	if apierrors.IsNotFound(err) {
		return nil // gone, or a mirror pod not created yet (the resync retries)
	}
	if err != nil {
		return err
	}
	if version != 0 {
		s.mu.Lock()
		a, ok := s.agreed[pod.UID]
		s.mu.Unlock()
		if ok && a.version == version && a.resourceVersion == cur.ResourceVersion {
			return nil
		}
	}
	agree := func(rv string) {
		if version != 0 {
			s.mu.Lock()
			s.agreed[pod.UID] = agreement{version: version, resourceVersion: rv}
			s.mu.Unlock()
		}
	}
	want := mergeStatus(cur.Status, st, podspec.IsStatic(pod))
	if s.hold != nil && podspec.IsTerminal(want.Phase) && !podspec.IsTerminal(cur.Status.Phase) && s.hold(pod.UID) {
		want.Phase, want.Reason, want.Message = cur.Status.Phase, cur.Status.Reason, cur.Status.Message
	}
	if apiequality.Semantic.DeepEqual(cur.Status, want) {
		agree(cur.ResourceVersion)
		return nil
	}
	// Never move a pod back out of a terminal phase.
	if podspec.IsTerminal(cur.Status.Phase) && !podspec.IsTerminal(want.Phase) {
		return nil
	}
	patch, err := statusPatch(cur, want)
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(5).Info("Patching pod status", "pod", klog.KObj(cur), "patch", string(patch))
	patched, err := s.client.CoreV1().Pods(cur.Namespace).Patch(ctx, cur.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // deleted or replaced meanwhile
	}
	// The patch is a diff from the informer's copy, which may be behind the
	// API server's: agreed only if the answer is what we wanted.
	if err == nil && apiequality.Semantic.DeepEqual(patched.Status, mergeStatus(patched.Status, st, podspec.IsStatic(pod))) {
		agree(patched.ResourceVersion)
	}
	return err
}

// Finish writes a deleted pod's final status and then deletes it with grace
// 0 and its UID as precondition, as upstream does once the pod's containers
// are gone.
func (s *Syncer) Finish(ctx context.Context, pod *v1.Pod, final v1.PodStatus) error {
	if err := s.write(ctx, pod, final, 0); err != nil {
		return err
	}
	if err := apiutil.DeletePodNow(ctx, s.client, pod); err != nil {
		return fmt.Errorf("delete pod: %w", err)
	}
	return nil
}

// ownedConditions are the conditions nodelet writes; others are kept.
var ownedConditions = map[v1.PodConditionType]bool{
	v1.PodReadyToStartContainers: true, v1.PodInitialized: true, v1.ContainersReady: true, v1.PodReady: true,
	v1.AllContainersRestarting: true, v1.PodResizePending: true, v1.PodResizeInProgress: true,
}

// mergeStatus is the status to write: ours, with the conditions others own
// kept as they are, in the order the API has them (a reordering alone would
// be a needless write). PodScheduled is the kubelet's too, as upstream's
// PodConditionsByKubelet (True, with the observed generation), keeping the
// scheduler's transition time while it stays True.
func mergeStatus(cur, ours v1.PodStatus, static bool) v1.PodStatus {
	out := *ours.DeepCopy()
	owned := func(t v1.PodConditionType) bool { return ownedConditions[t] || t == v1.PodScheduled }
	if c := findCondition(cur.Conditions, v1.PodScheduled); c != nil && !static {
		for i := range out.Conditions {
			if o := &out.Conditions[i]; o.Type == v1.PodScheduled && o.Status == c.Status {
				o.LastTransitionTime = c.LastTransitionTime
			}
		}
	}
	conds := out.Conditions
	mine := map[v1.PodConditionType]v1.PodCondition{}
	for _, c := range conds {
		// DisruptionTarget is the node's when it evicts the pod.
		if owned(c.Type) || c.Type == v1.DisruptionTarget {
			mine[c.Type] = c
		}
	}
	out.Conditions = nil
	for _, c := range cur.Conditions {
		if m, ok := mine[c.Type]; ok {
			out.Conditions = append(out.Conditions, m)
			delete(mine, c.Type)
		} else if !owned(c.Type) {
			out.Conditions = append(out.Conditions, c)
		}
	}
	for _, c := range conds {
		if _, ok := mine[c.Type]; ok {
			out.Conditions = append(out.Conditions, c)
		}
	}
	// Fields nodelet does not compute keep their API values.
	out.NominatedNodeName = cur.NominatedNodeName
	out.ResourceClaimStatuses = cur.ResourceClaimStatuses
	return out
}

func statusPatch(cur *v1.Pod, want v1.PodStatus) ([]byte, error) {
	oldJSON, err := json.Marshal(v1.Pod{Status: cur.Status})
	if err != nil {
		return nil, err
	}
	newJSON, err := json.Marshal(v1.Pod{Status: want})
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Pod{})
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	m["metadata"] = map[string]any{"uid": string(cur.UID)}
	return json.Marshal(m)
}
