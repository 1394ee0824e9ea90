package podcertificate

import (
	"context"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	certlistersv1 "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/apiclient"
)

// Interface is what nodelet and the projected volume use of a pod
// certificate manager (upstream's podcertificate.Manager). Manager and NoOp
// implement it.
type Interface interface {
	// TrackPod is called every time a pod is assigned to the node (added
	// or updated): its podCertificate sources are processed.
	TrackPod(ctx context.Context, pod *v1.Pod)
	// ForgetPod is called every time a pod is dropped from the node: its
	// credentials are forgotten.
	ForgetPod(ctx context.Context, pod *v1.Pod)
	// GetPodCertificateCredentialBundle returns the PEM private key and
	// certificate chain of the sourceIndex-th source of the pod's
	// projected volume volumeName, or why there are none (an error the
	// volume's FailedMount event shows).
	GetPodCertificateCredentialBundle(ctx context.Context, namespace, podName, podUID, volumeName string, sourceIndex int) (privateKey []byte, certificateChain []byte, err error)
	// MetricReport returns a snapshot of the sources' states.
	MetricReport() *MetricReport
}

var (
	_ Interface = (*Manager)(nil)
	_ Interface = NoOp{}
)

// MetricReport counts the podCertificate sources of the node's pods by
// signer and state: kubelet_podcertificate_states{signer_name,state}.
type MetricReport struct {
	PodCertificateStates map[SignerAndState]int
}

// SignerAndState is a signer name and a state (StateFresh...).
type SignerAndState struct {
	SignerName string
	State      string
}

// Pods are the pods the node runs; *podmanager.Manager is one.
type Pods interface {
	// Get returns the pod with uid; false once the node no longer runs it.
	Get(uid types.UID) (*v1.Pod, bool)
	// Admitted returns every pod the node runs but exclude ("": all).
	Admitted(exclude types.UID) []*v1.Pod
}

// Config configures a Manager.
type Config struct {
	// Client creates PodCertificateRequests (certificates.k8s.io/v1) and
	// watches those of the node, and reads service accounts (their UID
	// goes into the requests). Required.
	Client apiclient.Interface
	// NodeName is the node's name: the requests' spec.nodeName, and the
	// informer's field selector. Required.
	NodeName string
	// Node returns the Node object (nil until registered), whose UID goes
	// into the requests' spec.nodeUID. Required.
	Node func() *v1.Node
	// Pods are the pods the node runs. Required.
	Pods Pods
	// Recorder gets the pods' warning events (Denied, Failed,
	// CertificateOverdueForRefresh, CertificateExpired). Required.
	Recorder record.EventRecorder
	// Clock defaults to the real clock.
	Clock clock.WithTicker
}

// Manager is upstream's IssuingManager. Each podCertificate source of each
// pod is a key of a work queue; every event of a request, every TrackPod
// and a refresh pass every one to two minutes queue the pod's sources
// again, and processing one steps its state machine (handleProjection).
type Manager struct {
	client   apiclient.Interface
	nodeName string
	node     func() *v1.Node
	pods     Pods
	recorder record.EventRecorder
	clock    clock.WithTicker
	// jitter returns a random delay in [0, maxJitter); tests replace it.
	jitter func() time.Duration

	queue     workqueue.TypedRateLimitingInterface[projectionKey]
	informer  cache.SharedIndexInformer
	pcrLister certlistersv1.PodCertificateRequestLister
	hasSynced cache.InformerSynced
	ran       atomic.Bool

	// lock covers credStore.
	lock      sync.Mutex
	credStore map[projectionKey]*projectionRecord
}

// projectionKey names one podCertificate source of one pod.
type projectionKey struct {
	Namespace   string
	PodName     string
	PodUID      string
	VolumeName  string
	SourceIndex int
}

type projectionRecord struct {
	// lock covers curState.
	lock     sync.Mutex
	curState credState
}

// New returns a Manager for cfg; Run runs it. It fails when cfg has no
// Client, NodeName, Node, Pods or Recorder.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("podcertificate: Config.Client is required")
	case cfg.NodeName == "":
		return nil, errors.New("podcertificate: Config.NodeName is required")
	case cfg.Node == nil:
		return nil, errors.New("podcertificate: Config.Node is required")
	case cfg.Pods == nil:
		return nil, errors.New("podcertificate: Config.Pods is required")
	case cfg.Recorder == nil:
		return nil, errors.New("podcertificate: Config.Recorder is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	pcrs := cfg.Client.CertificatesV1().PodCertificateRequests(metav1.NamespaceAll)
	inf := cache.NewSharedIndexInformer(apiclient.ListWatch(cfg.Client, pcrs.List, pcrs.Watch, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
	}), &certificatesv1.PodCertificateRequest{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	m := &Manager{
		client:    cfg.Client,
		nodeName:  cfg.NodeName,
		node:      cfg.Node,
		pods:      cfg.Pods,
		recorder:  cfg.Recorder,
		clock:     cfg.Clock,
		jitter:    jitterDuration,
		queue:     newQueue(cfg.Clock),
		informer:  inf,
		pcrLister: certlistersv1.NewPodCertificateRequestLister(inf.GetIndexer()),
		hasSynced: inf.HasSynced,
		credStore: map[projectionKey]*projectionRecord{},
	}
	// Every change of a request queues the sources of its pod: not needed
	// for correctness (the refresh pass would get there), but the
	// certificate is noticed as soon as it is issued.
	queuePod := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if pcr, ok := obj.(*certificatesv1.PodCertificateRequest); ok {
			m.queueAllProjectionsForPod(pcr.Spec.PodUID)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    queuePod,
		UpdateFunc: func(_, cur any) { queuePod(cur) },
		DeleteFunc: queuePod,
	}); err != nil {
		return nil, fmt.Errorf("podcertificate: %w", err)
	}
	return m, nil
}

func newQueue(c clock.WithTicker) workqueue.TypedRateLimitingInterface[projectionKey] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[projectionKey](),
		workqueue.TypedRateLimitingQueueConfig[projectionKey]{Clock: c})
}

// jitterDuration returns a random delay of up to five minutes, so that
// sources do not synchronize their requests.
func jitterDuration() time.Duration {
	return time.Duration(mathrand.Int64N(int64(maxJitter)))
}

// Run runs the requests' informer and, once it has synced, processes the
// sources and queues all of them again every one to two minutes, until ctx
// is done. It runs once: a second call fails.
func (m *Manager) Run(ctx context.Context) error {
	if !m.ran.CompareAndSwap(false, true) {
		return errors.New("podcertificate: Run called twice")
	}
	logger := klog.FromContext(ctx)
	logger.Info("Pod certificate manager starting")
	var wg sync.WaitGroup
	defer wg.Wait()
	defer m.queue.ShutDown() // before wg.Wait: ends the worker
	wg.Go(func() { m.informer.RunWithContext(ctx) })
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return m.hasSynced(), nil
	}); err != nil {
		return nil // ctx is done
	}
	logger.V(2).Info("Pod certificate manager synced its PodCertificateRequests")
	wg.Go(func() {
		wait.BackoffUntilWithContext(ctx, m.runRefreshPass, wait.NewJitteredBackoffManager(time.Minute, 1.0, m.clock), false)
	})
	wg.Go(func() {
		for m.processNextProjection(ctx) {
		}
	})
	<-ctx.Done()
	logger.Info("Pod certificate manager shut down")
	return nil
}

// queueAllProjectionsForPod queues every podCertificate source of the pod
// with uid, if the node runs it.
func (m *Manager) queueAllProjectionsForPod(uid types.UID) {
	pod, ok := m.pods.Get(uid)
	if !ok {
		return
	}
	for _, key := range projectionKeys(pod) {
		m.queue.Add(key)
	}
}

// projectionKeys returns the keys of the pod's podCertificate sources.
func projectionKeys(pod *v1.Pod) []projectionKey {
	var keys []projectionKey
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for i, source := range v.Projected.Sources {
			if source.PodCertificate == nil {
				continue
			}
			keys = append(keys, projectionKey{
				Namespace:   pod.Namespace,
				PodName:     pod.Name,
				PodUID:      string(pod.UID),
				VolumeName:  v.Name,
				SourceIndex: i,
			})
		}
	}
	return keys
}

// runRefreshPass queues the sources of every pod the node runs, and every
// source with credentials (those of pods gone, which handleProjection
// forgets).
func (m *Manager) runRefreshPass(context.Context) {
	for _, pod := range m.pods.Admitted("") {
		m.queueAllProjectionsForPod(pod.UID)
	}
	m.lock.Lock()
	keys := make([]projectionKey, 0, len(m.credStore))
	for k := range m.credStore {
		keys = append(keys, k)
	}
	m.lock.Unlock()
	for _, k := range keys {
		m.queue.Add(k)
	}
}

func (m *Manager) processNextProjection(ctx context.Context) bool {
	key, quit := m.queue.Get()
	if quit {
		return false
	}
	defer m.queue.Done(key)
	if err := m.handleProjection(ctx, key); err != nil {
		klog.FromContext(ctx).Error(err, "While handling podCertificate projected volume source",
			"pod", klog.KRef(key.Namespace, key.PodName), "podUID", key.PodUID, "volume", key.VolumeName, "sourceIndex", key.SourceIndex)
		m.queue.AddRateLimited(key)
		return true
	}
	m.queue.Forget(key)
	return true
}

// handleProjection steps the state machine of one source. A nil error
// drops the key from the queue (events of the request bring it back); an
// error retries it with a back-off.
func (m *Manager) handleProjection(ctx context.Context, key projectionKey) error {
	logger := klog.FromContext(ctx)

	pod, ok := m.pods.Get(types.UID(key.PodUID))
	if !ok {
		// The pod is gone: forget its credentials.
		m.cleanupCredStoreForPod(key.Namespace, key.PodName, key.PodUID)
		return nil
	}
	source := findSource(pod, key.VolumeName, key.SourceIndex)
	if source == nil {
		// No amount of retrying will fix this.
		logger.Error(nil, "Pod does not contain the named podCertificate projected volume source",
			"pod", klog.KObj(pod), "volume", key.VolumeName, "sourceIndex", key.SourceIndex)
		return nil
	}

	m.lock.Lock()
	rec := m.credStore[key]
	if rec == nil {
		rec = &projectionRecord{curState: &credStateInitial{}}
		m.credStore[key] = rec
	}
	m.lock.Unlock()

	rec.lock.Lock()
	defer rec.lock.Unlock()

	now := m.clock.Now()
	switch state := rec.curState.(type) {
	case *credStateInitial:
		privKey, pcr, err := m.createPodCertificateRequest(ctx, pod, source)
		if err != nil {
			return fmt.Errorf("while creating initial PodCertificateRequest: %w", err)
		}
		rec.curState = &credStateWait{
			privateKey:   privKey,
			pcrName:      pcr.Name,
			pcrAbandonAt: pcr.CreationTimestamp.Add(assumeDeletedThreshold + m.jitter()),
		}
		logger.V(4).Info("PodCertificateRequest created, moving to credStateWait", "pod", klog.KObj(pod), "volume", key.VolumeName,
			"sourceIndex", key.SourceIndex, "podCertificateRequest", klog.KObj(pcr))
		return nil

	case *credStateWait:
		pcr, err := m.pcrLister.PodCertificateRequests(key.Namespace).Get(state.pcrName)
		if assumedDeleted(apierrors.IsNotFound(err), now, state.pcrAbandonAt) {
			// Not found can be the informer lagging behind or the request
			// deleted; long after its creation it is the latter: start over.
			rec.curState = &credStateInitial{}
			return fmt.Errorf("PodCertificateRequest %q appears to have been deleted", key.Namespace+"/"+state.pcrName)
		} else if err != nil {
			return fmt.Errorf("while getting PodCertificateRequest %q: %w", key.Namespace+"/"+state.pcrName, err)
		}
		next, err := m.answered(ctx, pod, pcr, state.privateKey)
		if err != nil {
			return err
		}
		if next != nil {
			rec.curState = next
			return nil
		}
		logger.V(4).Info("PodCertificateRequest not in terminal state, remaining in credStateWait", "pod", klog.KObj(pod),
			"volume", key.VolumeName, "sourceIndex", key.SourceIndex, "podCertificateRequest", klog.KObj(pcr))
		return nil

	case *credStateDenied, *credStateFailed:
		// Final for the source: the pod must be recreated.
		logger.V(4).Info("Pod certificate permanently refused, staying there", "pod", klog.KObj(pod),
			"volume", key.VolumeName, "sourceIndex", key.SourceIndex, "state", state.metricsState(now))
		return nil

	case *credStateFresh:
		if !refreshDue(now, state.beginRefreshAt) {
			return nil
		}
		logger.V(4).Info("Time to refresh the pod certificate", "pod", klog.KObj(pod), "volume", key.VolumeName, "sourceIndex", key.SourceIndex)
		m.warn(ctx, pod, now, &state.issued)
		privKey, pcr, err := m.createPodCertificateRequest(ctx, pod, source)
		if err != nil {
			return fmt.Errorf("while creating refresh PodCertificateRequest: %w", err)
		}
		rec.curState = &credStateWaitRefresh{
			issued:              state.issued,
			refreshPrivateKey:   privKey,
			refreshPCRName:      pcr.Name,
			refreshPCRAbandonAt: pcr.CreationTimestamp.Add(assumeDeletedThreshold + m.jitter()),
		}
		logger.V(4).Info("PodCertificateRequest created, moving to credStateWaitRefresh", "pod", klog.KObj(pod), "volume", key.VolumeName,
			"sourceIndex", key.SourceIndex, "podCertificateRequest", klog.KObj(pcr))
		return nil

	case *credStateWaitRefresh:
		pcr, err := m.pcrLister.PodCertificateRequests(key.Namespace).Get(state.refreshPCRName)
		if assumedDeleted(apierrors.IsNotFound(err), now, state.refreshPCRAbandonAt) {
			// As in credStateWait; back to credStateFresh, which creates a
			// new refresh request.
			rec.curState = &credStateFresh{issued: state.issued}
			return fmt.Errorf("PodCertificateRequest appears to have been deleted")
		} else if err != nil {
			return fmt.Errorf("while getting PodCertificateRequest %q: %w", key.Namespace+"/"+state.refreshPCRName, err)
		}
		next, err := m.answered(ctx, pod, pcr, state.refreshPrivateKey)
		if err != nil {
			return err
		}
		if next != nil {
			rec.curState = next
			return nil
		}
		logger.V(4).Info("PodCertificateRequest not in terminal state, remaining in credStateWaitRefresh", "pod", klog.KObj(pod),
			"volume", key.VolumeName, "sourceIndex", key.SourceIndex, "podCertificateRequest", klog.KObj(pcr))
		m.warn(ctx, pod, now, &state.issued)
		return nil
	}
	return nil
}

// findSource returns the sourceIndex-th source of the projected volume
// volumeName of pod if it is a podCertificate source, else nil.
func findSource(pod *v1.Pod, volumeName string, sourceIndex int) *v1.PodCertificateProjection {
	for _, vol := range pod.Spec.Volumes {
		if vol.Name == volumeName && vol.Projected != nil && sourceIndex >= 0 && sourceIndex < len(vol.Projected.Sources) {
			return vol.Projected.Sources[sourceIndex].PodCertificate
		}
	}
	return nil
}

// answered returns the state a request answered by its signer leads to
// (sending the pod the Denied or Failed event), or nil while it is
// pending. privateKey is the key the request was made for.
func (m *Manager) answered(ctx context.Context, pod *v1.Pod, pcr *certificatesv1.PodCertificateRequest, privateKey []byte) (credState, error) {
	logger := klog.FromContext(ctx)
	name := pcr.Namespace + "/" + pcr.Name
	outcome, cond := classifyRequest(pcr)
	switch outcome {
	case requestDenied:
		logger.V(4).Info("PodCertificateRequest denied, moving to credStateDenied", "pod", klog.KObj(pod), "podCertificateRequest", klog.KObj(pcr))
		m.recorder.Eventf(pod, v1.EventTypeWarning, certificatesv1.PodCertificateRequestConditionTypeDenied,
			"PodCertificateRequest %s was denied, reason=%q, message=%q", name, cond.Reason, cond.Message)
		return &credStateDenied{Reason: cond.Reason, Message: cond.Message}, nil
	case requestFailed:
		logger.V(4).Info("PodCertificateRequest failed, moving to credStateFailed", "pod", klog.KObj(pod), "podCertificateRequest", klog.KObj(pcr))
		m.recorder.Eventf(pod, v1.EventTypeWarning, certificatesv1.PodCertificateRequestConditionTypeFailed,
			"PodCertificateRequest %s failed, reason=%q, message=%q", name, cond.Reason, cond.Message)
		return &credStateFailed{Reason: cond.Reason, Message: cond.Message}, nil
	case requestIssued:
		cred, err := issuedCredential(pcr, privateKey, m.jitter())
		if err != nil {
			return nil, err
		}
		logger.V(4).Info("PodCertificateRequest issued, moving to credStateFresh", "pod", klog.KObj(pod), "podCertificateRequest", klog.KObj(pcr))
		return &credStateFresh{issued: cred}, nil
	}
	return nil, nil
}

// warn sends the pod the warning events c calls for at now, once each.
func (m *Manager) warn(ctx context.Context, pod *v1.Pod, now time.Time, c *issued) {
	logger := klog.FromContext(ctx)
	overdue, expiredNow := dueWarnings(now, c)
	if overdue {
		logger.V(4).Info("Pod certificate refresh overdue", "pod", klog.KObj(pod))
		m.recorder.Eventf(pod, v1.EventTypeWarning, "CertificateOverdueForRefresh", "PodCertificate refresh overdue")
		c.eventEmittedForOverdueForRefresh = true
	}
	if expiredNow {
		logger.V(4).Info("Pod certificate expired", "pod", klog.KObj(pod))
		m.recorder.Eventf(pod, v1.EventTypeWarning, "CertificateExpired", "PodCertificate expired")
		c.eventEmittedForExpiration = true
	}
}

// createPodCertificateRequest generates a key for source and creates the
// PodCertificateRequest for it; it returns the PEM key and the request
// created.
func (m *Manager) createPodCertificateRequest(ctx context.Context, pod *v1.Pod, source *v1.PodCertificateProjection) ([]byte, *certificatesv1.PodCertificateRequest, error) {
	// The service account's UID, read each time as upstream.
	sa, err := m.client.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, pod.Spec.ServiceAccountName, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("while fetching service account: %w", err)
	}
	node := m.node()
	if node == nil || node.Name != m.nodeName {
		// What upstream's node lister says before the node is known.
		return nil, nil, fmt.Errorf("while getting node object from local cache: %w",
			apierrors.NewNotFound(v1.Resource("node"), m.nodeName))
	}

	privateKey, pkcs10Req, err := generateKeyAndProof(source.KeyType)
	if err != nil {
		return nil, nil, fmt.Errorf("while generating keypair: %w", err)
	}
	keyPEM, err := pemEncodeKey(privateKey)
	if err != nil {
		return nil, nil, fmt.Errorf("while PEM-encoding private key: %w", err)
	}
	req := newPodCertificateRequest(pod, sa.UID, types.NodeName(m.nodeName), node.UID, source, pkcs10Req)
	req, err = m.client.CertificatesV1().PodCertificateRequests(pod.Namespace).Create(ctx, req, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("while creating on API: %w", err)
	}
	return keyPEM, req, nil
}

// newPodCertificateRequest is the request for source of pod: owned by the
// pod (so that it goes with it), named by the API server ("req-" and a
// suffix).
func newPodCertificateRequest(pod *v1.Pod, saUID types.UID, nodeName types.NodeName, nodeUID types.UID,
	source *v1.PodCertificateProjection, pkcs10Req []byte) *certificatesv1.PodCertificateRequest {
	return &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    pod.Namespace,
			GenerateName: "req-",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1",
				Kind:       "Pod",
				Name:       pod.Name,
				UID:        pod.UID,
			}},
		},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName:                source.SignerName,
			PodName:                   pod.Name,
			PodUID:                    pod.UID,
			ServiceAccountName:        pod.Spec.ServiceAccountName,
			ServiceAccountUID:         saUID,
			NodeName:                  nodeName,
			NodeUID:                   nodeUID,
			MaxExpirationSeconds:      source.MaxExpirationSeconds,
			StubPKCS10Request:         pkcs10Req,
			UnverifiedUserAnnotations: source.UserAnnotations,
		},
	}
}

// TrackPod queues the pod's podCertificate sources. The pod must be in
// Pods already.
func (m *Manager) TrackPod(_ context.Context, pod *v1.Pod) {
	m.queueAllProjectionsForPod(pod.UID)
}

// ForgetPod forgets the pod's credentials at once; its queued sources find
// it gone.
func (m *Manager) ForgetPod(_ context.Context, pod *v1.Pod) {
	m.cleanupCredStoreForPod(pod.Namespace, pod.Name, string(pod.UID))
}

// cleanupCredStoreForPod removes every credStore entry of the pod.
func (m *Manager) cleanupCredStoreForPod(namespace, podName, podUID string) {
	m.lock.Lock()
	defer m.lock.Unlock()
	for k := range m.credStore {
		if k.Namespace == namespace && k.PodName == podName && k.PodUID == podUID {
			delete(m.credStore, k)
		}
	}
}

// GetPodCertificateCredentialBundle returns the PEM private key and
// certificate chain of the sourceIndex-th source of the pod's projected
// volume volumeName. The errors are upstream's; they surface in the
// volume's FailedMount events.
func (m *Manager) GetPodCertificateCredentialBundle(_ context.Context, namespace, podName, podUID, volumeName string, sourceIndex int) ([]byte, []byte, error) {
	credKey := projectionKey{
		Namespace:   namespace,
		PodName:     podName,
		PodUID:      podUID,
		VolumeName:  volumeName,
		SourceIndex: sourceIndex,
	}
	m.lock.Lock()
	rec := m.credStore[credKey]
	m.lock.Unlock()
	if rec == nil {
		return nil, nil, fmt.Errorf("no credentials yet for key=%v", credKey)
	}
	rec.lock.Lock()
	defer rec.lock.Unlock()
	return rec.curState.getCredBundle()
}

// MetricReport counts the podCertificate sources of the pods the node runs
// by signer and state; sources not processed yet are not counted.
func (m *Manager) MetricReport() *MetricReport {
	report := &MetricReport{PodCertificateStates: map[SignerAndState]int{}}
	now := m.clock.Now()
	for _, pod := range m.pods.Admitted("") {
		for _, key := range projectionKeys(pod) {
			m.lock.Lock()
			rec := m.credStore[key]
			m.lock.Unlock()
			if rec == nil {
				continue
			}
			source := findSource(pod, key.VolumeName, key.SourceIndex)
			rec.lock.Lock()
			state := rec.curState.metricsState(now)
			rec.lock.Unlock()
			report.PodCertificateStates[SignerAndState{SignerName: source.SignerName, State: state}]++
		}
	}
	return report
}

// NoOp is the Interface of a node without an API server (standalone) or
// with the PodCertificateRequest feature off: no credentials.
type NoOp struct{}

// TrackPod does nothing.
func (NoOp) TrackPod(context.Context, *v1.Pod) {}

// ForgetPod does nothing.
func (NoOp) ForgetPod(context.Context, *v1.Pod) {}

// GetPodCertificateCredentialBundle fails, as upstream's NoOpManager.
func (NoOp) GetPodCertificateCredentialBundle(context.Context, string, string, string, string, int) ([]byte, []byte, error) {
	return nil, nil, errors.New("unimplemented")
}

// MetricReport is empty.
func (NoOp) MetricReport() *MetricReport { return &MetricReport{} }
