package pullmanager

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
)

// writeRecordWhileMatchingLimit is the number of secrets of a record above
// which MustAttemptImagePull no longer adds the matching pod secret to it
// (against unbounded writes with namespace turnover).
const writeRecordWhileMatchingLimit = 100

// ImageLister lists the runtime's images: a CRI ImageManagerService.
type ImageLister interface {
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
}

// GetPodCredentials returns the pod's pull secrets that match the image
// (with their credential hashes) and the service account whose token a
// credential provider got for it, if any. MustAttemptImagePull calls it
// only when the decision depends on them.
type GetPodCredentials func() ([]kubeletconfigv1beta1.ImagePullSecret, *kubeletconfigv1beta1.ImagePullServiceAccount, error)

// Config configures a Manager.
type Config struct {
	// RootDir is the kubelet's root directory; the records are under
	// RootDir/image_manager. Required.
	RootDir string
	// Images lists the runtime's images, for the intents left by a previous
	// run. Required.
	Images ImageLister
	// Policy is imagePullCredentialsVerificationPolicy; empty:
	// NeverVerifyPreloadedImages, upstream's default.
	Policy kubeletconfigv1beta1.ImagePullCredentialsVerificationPolicy
	// Allowlist is preloadedImagesVerificationAllowlist, for
	// NeverVerifyAllowlistedImages.
	Allowlist []string
	// MaxPods (required, positive) and MaxParallelImagePulls (0: unset) size
	// the caches and locks as upstream: 2*max(MaxPods, MaxParallelImagePulls)
	// intents, 5*MaxPods pulled records.
	MaxPods               int32
	MaxParallelImagePulls int32
	// Registerer gets the kubelet_imagemanager_* metrics; nil registers none.
	Registerer prometheus.Registerer
	// Clock defaults to the real clock.
	Clock clock.Clock
}

// Manager keeps the records of the images the kubelet pulls and decides
// whether a pod must pull (and so present its credentials for) an image
// already on the node. It is safe for concurrent use.
type Manager struct {
	records recordsAccessor
	policy  requireVerification
	images  ImageLister
	clock   clock.Clock
	metrics *metrics

	intentLocks    *stripedLockSet // by image
	intentCounters sync.Map        // image -> int32, pulls in flight
	pulledLocks    *stripedLockSet // by imageRef
}

// New reads (and migrates) the records under cfg.RootDir, then turns the
// pull intents left by a previous run into pulled records for the images
// the runtime has.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	switch {
	case cfg.RootDir == "":
		return nil, errors.New("pullmanager: Config.RootDir is required")
	case cfg.Images == nil:
		return nil, errors.New("pullmanager: Config.Images is required")
	case cfg.MaxPods <= 0:
		return nil, fmt.Errorf("pullmanager: Config.MaxPods %d must be positive", cfg.MaxPods)
	case cfg.MaxParallelImagePulls < 0:
		return nil, fmt.Errorf("pullmanager: Config.MaxParallelImagePulls %d must not be negative", cfg.MaxParallelImagePulls)
	}
	if cfg.Policy == "" {
		cfg.Policy = kubeletconfigv1beta1.NeverVerifyPreloadedImages
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	policy, err := newPolicy(cfg.Policy, cfg.Allowlist)
	if err != nil {
		return nil, fmt.Errorf("pullmanager: %w", err)
	}
	m := newMetrics(cfg.Registerer)
	fs, err := newFSRecords(ctx, cfg.RootDir, m)
	if err != nil {
		return nil, fmt.Errorf("pullmanager: failed to setup the FSPullRecordsAccessor: %w", err)
	}
	intentsCacheSize := max(2*cfg.MaxPods, 2*cfg.MaxParallelImagePulls)
	records := newCachedRecords(ctx, fs, intentsCacheSize, 5*cfg.MaxPods, cfg.MaxParallelImagePulls, m)
	mgr := newManager(records, policy, cfg.Images, cfg.MaxParallelImagePulls, cfg.Clock, m)
	mgr.initialize(ctx)
	return mgr, nil
}

func newManager(records recordsAccessor, policy requireVerification, images ImageLister, lockStripes int32, clk clock.Clock, m *metrics) *Manager {
	return &Manager{
		records: records, policy: policy, images: images, clock: clk, metrics: m,
		intentLocks: newStripedLockSet(lockStripes),
		pulledLocks: newStripedLockSet(lockStripes),
	}
}

// RecordPullIntent records the intent to pull image (a container's image
// field); call it before each pull, and after it exactly one of
// RecordImagePulled and RecordImagePullFailed.
func (m *Manager) RecordPullIntent(ctx context.Context, image string) error {
	m.intentLocks.Lock(image)
	defer m.intentLocks.Unlock(image)
	if err := m.records.WriteImagePullIntent(ctx, image); err != nil {
		return fmt.Errorf("failed to record image pull intent: %w", err)
	}
	m.intentCounters.Store(image, m.intentCounter(image)+1)
	return nil
}

// RecordImagePulled records that image was pulled as imageRef with
// credentials: exactly one secret, or one service account, or
// NodePodsAccessible (no credentials, or the node's own).
func (m *Manager) RecordImagePulled(ctx context.Context, image, imageRef string, credentials *kubeletconfigv1beta1.ImagePullCredentials) {
	if err := m.writePulledRecordIfChanged(ctx, image, imageRef, credentials); err != nil {
		klog.FromContext(ctx).Error(err, "failed to write image pulled record", "imageRef", imageRef)
		// The intent stays, so that the image still counts as pulled by
		// the kubelet; the next start turns it into a pulled record.
		return
	}
	m.decrementImagePullIntent(ctx, image)
}

// RecordImagePullFailed records that a pull of image failed: the intent is
// removed with the last pull in flight.
func (m *Manager) RecordImagePullFailed(ctx context.Context, image string) {
	m.decrementImagePullIntent(ctx, image)
}

// writePulledRecordIfChanged merges credentials into the pulled record of
// imageRef. nil credentials (an image pulled in unknown circumstances)
// create a record without any, so that pods must verify theirs.
func (m *Manager) writePulledRecordIfChanged(ctx context.Context, image, imageRef string, credentials *kubeletconfigv1beta1.ImagePullCredentials) error {
	logger := klog.FromContext(ctx)
	m.pulledLocks.Lock(imageRef)
	defer m.pulledLocks.Unlock(imageRef)

	sanitizedImage, err := trimImageTagDigest(image)
	if err != nil {
		return fmt.Errorf("invalid image name %q: %w", image, err)
	}
	record, _, err := m.records.GetImagePulledRecord(imageRef)
	if err != nil {
		logger.Info("failed to retrieve an ImagePulledRecord", "image", image, "err", err)
		record = nil
	}
	now := m.clock.Now()
	var changed bool
	if record == nil {
		record, changed = newPulledRecord(imageRef, sanitizedImage, credentials, now), true
	} else {
		record, changed = pulledRecordMergeNewCreds(record, sanitizedImage, credentials, now)
	}
	if !changed {
		return nil
	}
	return m.records.WriteImagePulledRecord(ctx, record)
}

// decrementImagePullIntent counts a pull of image done, and removes its
// intent when it was the last one in flight.
func (m *Manager) decrementImagePullIntent(ctx context.Context, image string) {
	logger := klog.FromContext(ctx)
	m.intentLocks.Lock(image)
	defer m.intentLocks.Unlock(image)
	if n := m.intentCounter(image); n > 1 {
		m.intentCounters.Store(image, n-1)
		return
	}
	if err := m.records.DeleteImagePullIntent(ctx, image); err != nil {
		logger.Error(err, "failed to remove image pull intent", "image", image)
		return
	}
	// only once the record is gone, to stay consistent with it
	m.intentCounters.Delete(image)
}

func (m *Manager) intentCounter(image string) int32 {
	n, ok := m.intentCounters.Load(image)
	if !ok {
		return 0
	}
	return n.(int32)
}

// MustAttemptImagePull tells whether a pod must pull image (a container's
// image field), which the runtime has as imageRef (empty: not on the node),
// to check its credentials: the policy is applied first, then the pulled
// record is looked up for the pod's credentials from getPodCredentials.
// It returns true and getPodCredentials' error when that fails; errors
// reading the records count as true.
func (m *Manager) MustAttemptImagePull(ctx context.Context, image, imageRef string, getPodCredentials GetPodCredentials) (bool, error) {
	if len(imageRef) == 0 {
		return true, nil
	}
	logger := klog.FromContext(ctx)

	var result mustAttemptImagePullResult
	defer func() {
		if len(result) == 0 {
			result = checkResultError
		}
		m.metrics.mustPullChecks.WithLabelValues(string(result)).Inc()
	}()

	var pulledByKubelet bool
	var record *kubeletconfigv1beta1.ImagePulledRecord
	err := func() error {
		// no changes to the records the decision is made on
		m.pulledLocks.Lock(imageRef)
		defer m.pulledLocks.Unlock(imageRef)
		m.intentLocks.Lock(image)
		defer m.intentLocks.Unlock(image)

		var exists bool
		var err error
		record, exists, err = m.records.GetImagePulledRecord(imageRef)
		switch {
		case err != nil:
			return err
		case exists, record != nil:
			pulledByKubelet = true
		case m.intentCounter(image) > 0:
			pulledByKubelet = true
		default:
			// no pull in flight may also mean the kubelet restarted since
			// writing the intent
			exists, err := m.records.ImagePullIntentExists(image)
			if err != nil {
				return fmt.Errorf("failed to check existence of an image pull intent: %w", err)
			}
			pulledByKubelet = exists
		}
		return nil
	}()
	if err != nil {
		result = checkResultError
		logger.Error(err, "Unable to access cache records about image pulls")
		return true, nil
	}

	if !m.policy(image, pulledByKubelet) {
		result = checkResultCredentialPolicyAllowed
		return false, nil
	}
	if record == nil {
		result = checkResultMustAuthenticate
		return true, nil
	}
	sanitizedImage, err := trimImageTagDigest(image)
	if err != nil {
		result = checkResultError
		logger.Error(err, "failed to parse image name, forcing image credentials reverification", "image", image)
		return true, nil
	}
	cached, ok := record.CredentialMapping[sanitizedImage]
	switch {
	case !ok:
		result = checkResultMustAuthenticate
		return true, nil
	case cached.NodePodsAccessible:
		result = checkResultCredentialRecordFound
		return false, nil
	case len(cached.KubernetesSecrets) == 0 && len(cached.KubernetesServiceAccounts) == 0:
		result = checkResultMustAuthenticate
		return true, nil
	}

	podSecrets, podServiceAccount, err := getPodCredentials()
	if err != nil {
		result = checkResultError
		return true, err
	}
	match, remember := matchPodSecrets(cached.KubernetesSecrets, podSecrets)
	if remember != nil {
		// make the pod's secret (its new hash, or its coordinates) valid in
		// the future; a no-op if it meanwhile is
		creds := &kubeletconfigv1beta1.ImagePullCredentials{KubernetesSecrets: []kubeletconfigv1beta1.ImagePullSecret{*remember}}
		if err := m.writePulledRecordIfChanged(ctx, image, imageRef, creds); err != nil {
			logger.Error(err, "failed to write an image pulled record", "image", image, "imageRef", imageRef)
		}
	}
	if match || (podServiceAccount != nil && slices.Contains(cached.KubernetesServiceAccounts, *podServiceAccount)) {
		result = checkResultCredentialRecordFound
		return false, nil
	}
	result = checkResultMustAuthenticate
	return true, nil
}

// matchPodSecrets tells whether one of podSecrets matches a secret the
// image was pulled with: the same (non-empty) credential hash, or the same
// coordinates. remember is the pod secret to add to the record, when it
// matched by only one of them and the record has fewer than
// writeRecordWhileMatchingLimit secrets.
func matchPodSecrets(cached, podSecrets []kubeletconfigv1beta1.ImagePullSecret) (match bool, remember *kubeletconfigv1beta1.ImagePullSecret) {
	canWrite := len(cached) < writeRecordWhileMatchingLimit
	for _, podSecret := range podSecrets {
		for _, cachedSecret := range cached {
			// an empty hash is one that failed to be computed
			hashesMatch := len(cachedSecret.CredentialHash) > 0 && podSecret.CredentialHash == cachedSecret.CredentialHash
			coordinatesMatch := podSecret.UID == cachedSecret.UID &&
				podSecret.Namespace == cachedSecret.Namespace &&
				podSecret.Name == cachedSecret.Name
			if hashesMatch {
				if !coordinatesMatch && canWrite {
					return true, &podSecret
				}
				return true, nil
			}
			if coordinatesMatch && canWrite {
				return true, &podSecret
			}
		}
	}
	return false, nil
}

// PruneUnknownRecords deletes the pulled records, last updated before until,
// of the images whose reference is not in imageList. The image garbage
// collector calls it with until taken before it listed the images.
func (m *Manager) PruneUnknownRecords(ctx context.Context, imageList []string, until time.Time) {
	m.pulledLocks.GlobalLock()
	defer m.pulledLocks.GlobalUnlock()

	logger := klog.FromContext(ctx)
	records, err := m.records.ListImagePulledRecords()
	if err != nil {
		logger.Error(err, "there were errors listing ImagePulledRecords, garbage collection will proceed with incomplete records list")
	}
	inUse := sets.New(imageList...)
	for _, r := range records {
		if !r.LastUpdatedTime.Time.Before(until) || inUse.Has(r.ImageRef) {
			continue
		}
		if err := m.records.DeleteImagePulledRecord(ctx, r.ImageRef); err != nil {
			logger.Error(err, "failed to remove an ImagePulledRecord", "imageRef", r.ImageRef)
		}
	}
}

// initialize turns the intents left by a previous run, whose image the
// runtime has (by tag or digest), into pulled records without credentials,
// and removes them. Only New calls it.
func (m *Manager) initialize(ctx context.Context) {
	logger := klog.FromContext(ctx)
	intents, err := m.records.ListImagePullIntents()
	if err != nil {
		logger.Error(err, "there were errors listing ImagePullIntents, continuing with an incomplete records list")
	}
	if len(intents) == 0 {
		return
	}
	images, err := m.images.ListImages(ctx, nil)
	if err != nil {
		logger.Error(err, "failed to list images")
	}
	inFlight := sets.New[string]()
	for _, intent := range intents {
		inFlight.Insert(intent.Image)
	}
	for _, img := range images {
		for _, image := range recordedTagsDigests(inFlight, img).UnsortedList() {
			if err := m.writePulledRecordIfChanged(ctx, image, img.GetId(), nil); err != nil {
				logger.Error(err, "failed to write an image pull record", "imageRef", img.GetId())
				continue
			}
			if err := m.records.DeleteImagePullIntent(ctx, image); err != nil {
				logger.V(2).Info("failed to remove image pull intent file", "imageName", image, "error", err)
			}
		}
	}
}

// recordedTagsDigests are the repo digests and tags of image in inFlight.
func recordedTagsDigests(inFlight sets.Set[string], image *runtimeapi.Image) sets.Set[string] {
	found := sets.New[string]()
	for _, name := range slices.Concat(image.GetRepoDigests(), image.GetRepoTags()) {
		if inFlight.Has(name) {
			found.Insert(name)
		}
	}
	return found
}

// newPulledRecord is the record of imageRef first pulled as
// imageNoTagDigest with creds (none when nil).
func newPulledRecord(imageRef, imageNoTagDigest string, creds *kubeletconfigv1beta1.ImagePullCredentials, now time.Time) *kubeletconfigv1beta1.ImagePulledRecord {
	r := &kubeletconfigv1beta1.ImagePulledRecord{
		LastUpdatedTime:   metav1.Time{Time: now},
		ImageRef:          imageRef,
		CredentialMapping: map[string]kubeletconfigv1beta1.ImagePullCredentials{},
	}
	if creds != nil {
		r.CredentialMapping[imageNoTagDigest] = *creds
	}
	return r
}

// pulledRecordMergeNewCreds merges newCreds into orig's credentials of
// imageNoTagDigest (a container's image without tag or digest), returning
// a copy updated at now when they changed, else orig. Node-wide access
// replaces secrets and service accounts and absorbs any later ones.
func pulledRecordMergeNewCreds(orig *kubeletconfigv1beta1.ImagePulledRecord, imageNoTagDigest string, newCreds *kubeletconfigv1beta1.ImagePullCredentials, now time.Time) (*kubeletconfigv1beta1.ImagePulledRecord, bool) {
	if newCreds == nil || (!newCreds.NodePodsAccessible && len(newCreds.KubernetesSecrets) == 0 && len(newCreds.KubernetesServiceAccounts) == 0) {
		return orig, false
	}
	selected, found := orig.CredentialMapping[imageNoTagDigest]
	switch {
	case !found:
		selected = *newCreds
	case selected.NodePodsAccessible:
		return orig, false
	case newCreds.NodePodsAccessible:
		selected = kubeletconfigv1beta1.ImagePullCredentials{NodePodsAccessible: true}
	case len(newCreds.KubernetesSecrets) > 0:
		var changed bool
		if selected.KubernetesSecrets, changed = mergePullSecrets(selected.KubernetesSecrets, newCreds.KubernetesSecrets); !changed {
			return orig, false
		}
	default:
		var changed bool
		if selected.KubernetesServiceAccounts, changed = mergePullServiceAccounts(selected.KubernetesServiceAccounts, newCreds.KubernetesServiceAccounts); !changed {
			return orig, false
		}
	}
	ret := orig.DeepCopy()
	if ret.CredentialMapping == nil {
		ret.CredentialMapping = map[string]kubeletconfigv1beta1.ImagePullCredentials{}
	}
	ret.CredentialMapping[imageNoTagDigest] = selected
	ret.LastUpdatedTime = metav1.Time{Time: now}
	return ret, true
}

type kubeSecretCoordinates struct {
	UID, Namespace, Name string
}

// mergePullSecrets merges the secrets of orig and new, unique by
// coordinates (the hash of new winning), sorted by namespace, name and UID;
// it returns orig unless new changed it.
func mergePullSecrets(orig, new []kubeletconfigv1beta1.ImagePullSecret) ([]kubeletconfigv1beta1.ImagePullSecret, bool) {
	credSet := make(map[kubeSecretCoordinates]string, len(orig)+len(new))
	for _, s := range orig {
		credSet[kubeSecretCoordinates{UID: s.UID, Namespace: s.Namespace, Name: s.Name}] = s.CredentialHash
	}
	changed := false
	for _, s := range new {
		key := kubeSecretCoordinates{UID: s.UID, Namespace: s.Namespace, Name: s.Name}
		if hash, ok := credSet[key]; !ok || hash != s.CredentialHash {
			changed = true
			credSet[key] = s.CredentialHash
		}
	}
	if !changed {
		return orig, false
	}
	ret := make([]kubeletconfigv1beta1.ImagePullSecret, 0, len(credSet))
	for c, hash := range credSet {
		ret = append(ret, kubeletconfigv1beta1.ImagePullSecret{UID: c.UID, Namespace: c.Namespace, Name: c.Name, CredentialHash: hash})
	}
	slices.SortFunc(ret, func(a, b kubeletconfigv1beta1.ImagePullSecret) int {
		return compareCoordinates(a.Namespace, a.Name, a.UID, b.Namespace, b.Name, b.UID)
	})
	return ret, true
}

// mergePullServiceAccounts merges the service accounts of orig and new,
// unique, sorted by namespace, name and UID; it returns orig unless new
// changed it.
func mergePullServiceAccounts(orig, new []kubeletconfigv1beta1.ImagePullServiceAccount) ([]kubeletconfigv1beta1.ImagePullServiceAccount, bool) {
	credSet := sets.New(orig...)
	changed := false
	for _, s := range new {
		if !credSet.Has(s) {
			changed = true
			credSet.Insert(s)
		}
	}
	if !changed {
		return orig, false
	}
	ret := credSet.UnsortedList()
	slices.SortFunc(ret, func(a, b kubeletconfigv1beta1.ImagePullServiceAccount) int {
		return compareCoordinates(a.Namespace, a.Name, a.UID, b.Namespace, b.Name, b.UID)
	})
	return ret, true
}

func compareCoordinates(aNamespace, aName, aUID, bNamespace, bName, bUID string) int {
	if c := strings.Compare(aNamespace, bNamespace); c != 0 {
		return c
	}
	if c := strings.Compare(aName, bName); c != 0 {
		return c
	}
	return strings.Compare(aUID, bUID)
}

// CredentialHash is upstream's CredentialHash of a registry credential
// (pkg/credentialprovider's hashAuthConfig of a keyring entry, which holds
// the username, password and email of a pull secret's or credential
// provider's docker config entry): the hex SHA-256 of its JSON encoding.
func CredentialHash(username, password, email string) string {
	// upstream's credentialprovider.AuthConfig, field for field
	type authConfig struct {
		Username      string `json:"username,omitempty"`
		Password      string `json:"password,omitempty"`
		Auth          string `json:"auth,omitempty"`
		Email         string `json:"email,omitempty"`
		ServerAddress string `json:"serveraddress,omitempty"`
		IdentityToken string `json:"identitytoken,omitempty"`
		RegistryToken string `json:"registrytoken,omitempty"`
	}
	data, err := json.Marshal(authConfig{Username: username, Password: password, Email: email})
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
