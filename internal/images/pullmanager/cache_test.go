package pullmanager

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

type (
	intent = kubeletconfigv1beta1.ImagePullIntent
	pulled = kubeletconfigv1beta1.ImagePulledRecord
)

// testRecords is an in-memory recordsAccessor; nextGetWriteError fails
// every call but the lists.
type testRecords struct {
	intents         map[string]*intent
	intentListError error

	pulledRecords          map[string]*pulled
	pulledRecordsListError error

	nextGetWriteError error
}

func newTestRecords(intents []*intent, pulledRecords []*pulled) *testRecords {
	return &testRecords{intents: intentsToMap(intents), pulledRecords: pulledRecordsToMap(pulledRecords)}
}

func (a *testRecords) withIntentsListError(err error) *testRecords { a.intentListError = err; return a }
func (a *testRecords) withPulledRecordsListError(err error) *testRecords {
	a.pulledRecordsListError = err
	return a
}
func (a *testRecords) withNextGetWriteError(err error) *testRecords {
	a.nextGetWriteError = err
	return a
}

func (a *testRecords) ListImagePullIntents() ([]*intent, error) {
	ret := make([]*intent, 0, len(a.intents))
	for _, i := range a.intents {
		ret = append(ret, i)
	}
	slices.SortFunc(ret, pullIntentsCmp)
	return ret, a.intentListError
}

func (a *testRecords) ListImagePulledRecords() ([]*pulled, error) {
	ret := make([]*pulled, 0, len(a.pulledRecords))
	for _, r := range a.pulledRecords {
		ret = append(ret, r)
	}
	slices.SortFunc(ret, pulledRecordsCmp)
	return ret, a.pulledRecordsListError
}

func (a *testRecords) ImagePullIntentExists(image string) (bool, error) {
	if a.nextGetWriteError != nil {
		return false, a.nextGetWriteError
	}
	_, exists := a.intents[image]
	return exists, nil
}

func (a *testRecords) GetImagePulledRecord(imageRef string) (*pulled, bool, error) {
	record, exists := a.pulledRecords[imageRef]
	if a.nextGetWriteError != nil {
		return nil, exists, a.nextGetWriteError
	}
	return record, exists, nil
}

func (a *testRecords) WriteImagePullIntent(_ context.Context, image string) error {
	if a.nextGetWriteError != nil {
		return a.nextGetWriteError
	}
	a.intents[image] = &intent{Image: image}
	return nil
}

func (a *testRecords) WriteImagePulledRecord(_ context.Context, rec *pulled) error {
	if a.nextGetWriteError != nil {
		return a.nextGetWriteError
	}
	a.pulledRecords[rec.ImageRef] = rec
	return nil
}

func (a *testRecords) DeleteImagePullIntent(_ context.Context, image string) error {
	if a.nextGetWriteError != nil {
		return a.nextGetWriteError
	}
	delete(a.intents, image)
	return nil
}

func (a *testRecords) DeleteImagePulledRecord(_ context.Context, imageRef string) error {
	if a.nextGetWriteError != nil {
		return a.nextGetWriteError
	}
	delete(a.pulledRecords, imageRef)
	return nil
}

// recordingRecords records the methods called on it.
type recordingRecords struct {
	recordsAccessor
	methodsCalled []string
}

func (a *recordingRecords) WriteImagePullIntent(ctx context.Context, image string) error {
	a.methodsCalled = append(a.methodsCalled, "WriteImagePullIntent")
	return a.recordsAccessor.WriteImagePullIntent(ctx, image)
}

func (a *recordingRecords) WriteImagePulledRecord(ctx context.Context, rec *pulled) error {
	a.methodsCalled = append(a.methodsCalled, "WriteImagePulledRecord")
	return a.recordsAccessor.WriteImagePulledRecord(ctx, rec)
}

func TestNewCachedRecords(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	manyIntents := generateTestPullIntents(51)
	slices.SortFunc(manyIntents, pullIntentsCmp)
	manyPulledRecords := generateTestPulledRecords(101)
	slices.SortFunc(manyPulledRecords, pulledRecordsCmp)

	tests := []struct {
		name                           string
		delegate                       *testRecords
		wantIntents                    []*intent
		wantIntentsAuthoritative       bool
		wantCacheIntents               map[string]*intent
		wantIntentsError               error
		wantPulledRecords              []*pulled
		wantPulledRecordsAuthoritative bool
		wantCachePulledRecords         map[string]*pulled
		wantPulledRecordsError         error
	}{
		{
			name:                     "no issues during init",
			delegate:                 newTestRecords(testPullIntents(), testPulledRecords()),
			wantCacheIntents:         intentsToMap(testPullIntents()),
			wantIntents:              testPullIntentsSorted(),
			wantIntentsAuthoritative: true, wantPulledRecords: testPulledRecordsSorted(),
			wantPulledRecordsAuthoritative: true,
			wantCachePulledRecords:         pulledRecordsToMap(testPulledRecords()),
		},
		{
			name:                           "delegate intents list error",
			delegate:                       newTestRecords(testPullIntents(), testPulledRecords()).withIntentsListError(errors.New("intentsError")),
			wantIntents:                    testPullIntentsSorted(),
			wantCacheIntents:               intentsToMap(testPullIntents()),
			wantIntentsError:               errors.New("intentsError"),
			wantPulledRecords:              testPulledRecordsSorted(),
			wantPulledRecordsAuthoritative: true,
			wantCachePulledRecords:         pulledRecordsToMap(testPulledRecords()),
		},
		{
			name:                     "delegate pulledRecords list error",
			delegate:                 newTestRecords(testPullIntents(), testPulledRecords()).withPulledRecordsListError(errors.New("pulledRecordsError")),
			wantIntents:              testPullIntentsSorted(),
			wantIntentsAuthoritative: true,
			wantCacheIntents:         intentsToMap(testPullIntents()),
			wantPulledRecords:        testPulledRecordsSorted(),
			wantCachePulledRecords:   pulledRecordsToMap(testPulledRecords()),
			wantPulledRecordsError:   errors.New("pulledRecordsError"),
		},
		{
			name: "both delegate lists fail during init",
			delegate: newTestRecords(testPullIntents(), testPulledRecords()).
				withPulledRecordsListError(errors.New("pulledRecordsError")).withIntentsListError(errors.New("intentsError")),
			wantIntents:            testPullIntentsSorted(),
			wantCacheIntents:       intentsToMap(testPullIntents()),
			wantIntentsError:       errors.New("intentsError"),
			wantPulledRecords:      testPulledRecordsSorted(),
			wantCachePulledRecords: pulledRecordsToMap(testPulledRecords()),
			wantPulledRecordsError: errors.New("pulledRecordsError"),
		},
		{
			name:                           "too many intents get cropped",
			delegate:                       newTestRecords(manyIntents, testPulledRecords()),
			wantIntents:                    manyIntents,
			wantCacheIntents:               intentsToMap(manyIntents[:50]),
			wantPulledRecords:              testPulledRecordsSorted(),
			wantPulledRecordsAuthoritative: true,
			wantCachePulledRecords:         pulledRecordsToMap(testPulledRecords()),
		},
		{
			name:                     "too many pulled records get cropped",
			delegate:                 newTestRecords(testPullIntents(), manyPulledRecords),
			wantIntents:              testPullIntentsSorted(),
			wantIntentsAuthoritative: true,
			wantCacheIntents:         intentsToMap(testPullIntents()),
			wantPulledRecords:        manyPulledRecords,
			wantCachePulledRecords:   pulledRecordsToMap(manyPulledRecords[:100]),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := newCachedRecords(ctx, tt.delegate, 50, 100, 10, newMetrics(nil))
			metered, ok := got.(*meteringRecords)
			if !ok {
				t.Fatalf("the accessor must be metered, got %T", got)
			}
			c, ok := metered.sizedRecords.(*cachedRecords)
			if !ok {
				t.Fatalf("the metered accessor's delegate is %T", metered.sizedRecords)
			}
			if err := cmpRecordsMapAndCache(tt.wantCacheIntents, c.intents); err != nil {
				t.Errorf("intents cache: %v", err)
			}
			gotIntents, err := got.ListImagePullIntents()
			if !reflect.DeepEqual(gotIntents, tt.wantIntents) || !cmpErrorStrings(err, tt.wantIntentsError) {
				t.Errorf("ListImagePullIntents() = %v, %v; want %v, %v", gotIntents, err, tt.wantIntents, tt.wantIntentsError)
			}
			if err := cmpRecordsMapAndCache(tt.wantCachePulledRecords, c.pulledRecords); err != nil {
				t.Errorf("pulled records cache: %v", err)
			}
			gotPulled, err := got.ListImagePulledRecords()
			if !reflect.DeepEqual(gotPulled, tt.wantPulledRecords) || !cmpErrorStrings(err, tt.wantPulledRecordsError) {
				t.Errorf("ListImagePulledRecords() = %v, %v; want %v, %v", gotPulled, err, tt.wantPulledRecords, tt.wantPulledRecordsError)
			}
			if a := c.intents.authoritative.Load(); a != tt.wantIntentsAuthoritative {
				t.Errorf("intents.authoritative = %v, want %v", a, tt.wantIntentsAuthoritative)
			}
			if a := c.pulledRecords.authoritative.Load(); a != tt.wantPulledRecordsAuthoritative {
				t.Errorf("pulledRecords.authoritative = %v, want %v", a, tt.wantPulledRecordsAuthoritative)
			}
		})
	}
}

func TestCachedRecordsListImagePullIntents(t *testing.T) {
	partialErr := errors.New("only partial list was returned")
	tests := []struct {
		name              string
		delegate          *testRecords
		inMemCache        *lruCache[string, intent]
		initAuthoritative bool
		wantAuthoritative bool
		wantList          []*intent
		wantErr           error
	}{
		{name: "successful intents list from delegate, start authoritative", delegate: newTestRecords(testPullIntents(), nil),
			inMemCache: mapToCache(intentsToMap([]*intent{{Image: "unexpected for this test"}})), initAuthoritative: true, wantAuthoritative: true,
			wantList: testPullIntentsSorted()},
		{name: "successful intents list from delegate, start non-authoritative", delegate: newTestRecords(testPullIntents(), nil),
			inMemCache: mapToCache(intentsToMap([]*intent{{Image: "this would be wrong"}})), wantAuthoritative: true,
			wantList: testPullIntentsSorted()},
		{name: "partial intents listed from delegate with an error, start authoritative", delegate: newTestRecords(testPullIntents()[:2], nil).withIntentsListError(partialErr),
			inMemCache: mapToCache(intentsToMap([]*intent{{Image: "unexpected for this test"}})), initAuthoritative: true, wantAuthoritative: true,
			wantList: testPullIntentsSorted()[:2], wantErr: partialErr},
		{name: "partial intents listed from delegate with an error, start non-authoritative", delegate: newTestRecords(testPullIntents(), nil).withIntentsListError(partialErr),
			inMemCache: mapToCache(intentsToMap([]*intent{{Image: "this would be wrong"}})),
			wantList:   testPullIntentsSorted(), wantErr: partialErr},
		{name: "delegate returns empty list", delegate: newTestRecords(nil, nil), inMemCache: mapToCache(map[string]*intent{}),
			initAuthoritative: true, wantAuthoritative: true, wantList: []*intent{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &cachedRecords{delegate: tt.delegate, intentsLocks: newStripedLockSet(10), intents: tt.inMemCache}
			c.intents.authoritative.Store(tt.initAuthoritative)
			got, err := c.ListImagePullIntents()
			if !reflect.DeepEqual(got, tt.wantList) || !cmpErrorStrings(err, tt.wantErr) {
				t.Errorf("ListImagePullIntents() = %v, %v; want %v, %v", got, err, tt.wantList, tt.wantErr)
			}
			if a := c.intents.authoritative.Load(); a != tt.wantAuthoritative {
				t.Errorf("authoritative = %v, want %v", a, tt.wantAuthoritative)
			}
		})
	}
}

func TestCachedRecordsListImagePulledRecords(t *testing.T) {
	partialErr := errors.New("only partial list was returned")
	tests := []struct {
		name              string
		delegate          *testRecords
		inMemCache        *lruCache[string, pulled]
		initAuthoritative bool
		wantAuthoritative bool
		wantList          []*pulled
		wantErr           error
	}{
		{name: "initial cache error gets cleared by successful imagePulledRecords list from delegate", delegate: newTestRecords(nil, testPulledRecords()),
			inMemCache: mapToCache(pulledRecordsToMap([]*pulled{{ImageRef: "this would be wrong"}})), wantAuthoritative: true,
			wantList: testPulledRecordsSorted()},
		{name: "initial cache error, partial imagePulledRecords listed from delegate with an error",
			delegate:   newTestRecords(nil, testPulledRecords()).withPulledRecordsListError(partialErr),
			inMemCache: mapToCache(pulledRecordsToMap([]*pulled{{ImageRef: "this would be wrong"}})),
			wantList:   testPulledRecordsSorted(), wantErr: partialErr},
		{name: "delegate returns empty list", delegate: newTestRecords(nil, nil),
			inMemCache:        mapToCache(pulledRecordsToMap([]*pulled{{ImageRef: "unexpected for this test"}})),
			initAuthoritative: true, wantAuthoritative: true, wantList: []*pulled{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &cachedRecords{delegate: tt.delegate, pulledRecordsLocks: newStripedLockSet(10), pulledRecords: tt.inMemCache}
			c.pulledRecords.authoritative.Store(tt.initAuthoritative)
			got, err := c.ListImagePulledRecords()
			if !reflect.DeepEqual(got, tt.wantList) || !cmpErrorStrings(err, tt.wantErr) {
				t.Errorf("ListImagePulledRecords() = %v, %v; want %v, %v", got, err, tt.wantList, tt.wantErr)
			}
			if a := c.pulledRecords.authoritative.Load(); a != tt.wantAuthoritative {
				t.Errorf("authoritative = %v, want %v", a, tt.wantAuthoritative)
			}
		})
	}
}

func TestCachedRecordsImagePullIntentExists(t *testing.T) {
	twoIntents := func() map[string]*intent {
		return intentsToMap([]*intent{{Image: "test.repo/org1/project3:tag"}, {Image: "test.repo/org2/project1:tag"}})
	}
	tests := []struct {
		name              string
		delegate          *testRecords
		initialCache      *lruCache[string, intent]
		initAuthoritative bool
		inputImage        string
		want              bool
		wantErr           error
		wantCacheIntents  map[string]*intent
	}{
		{name: "intent exists in cache", delegate: newTestRecords(nil, nil).withNextGetWriteError(errors.New("should not have occurred")),
			initialCache: mapToCache(intentsToMap(testPullIntents())), initAuthoritative: true,
			inputImage: "test.repo/org1/project1:tag", want: true, wantCacheIntents: intentsToMap(testPullIntents())},
		{name: "intent exists in delegate, nonauthoritative cache gets updated", delegate: newTestRecords(testPullIntents(), nil),
			initialCache: mapToCache(twoIntents()), inputImage: "test.repo/org1/project1:tag", want: true,
			wantCacheIntents: intentsToMap([]*intent{{Image: "test.repo/org1/project3:tag"}, {Image: "test.repo/org2/project1:tag"}, {Image: "test.repo/org1/project1:tag"}})},
		{name: "intent exists in delegate, authoritative cache sends not found", delegate: newTestRecords(testPullIntents(), nil),
			initialCache: mapToCache(twoIntents()), initAuthoritative: true, inputImage: "test.repo/org1/project1:tag", want: false,
			wantCacheIntents: twoIntents()},
		{name: "intent does not exist in cache or delegate", delegate: newTestRecords(testPullIntents(), nil),
			initialCache: mapToCache(intentsToMap(testPullIntents())), inputImage: "test.repo/org1/doesnotexist:tag",
			wantCacheIntents: intentsToMap(testPullIntents())},
		{name: "intent does not exist in cache, delegate returns error on GET", delegate: newTestRecords(testPullIntents(), nil).withNextGetWriteError(errors.New("record malformed")),
			initialCache: mapToCache(intentsToMap(testPullIntents())), inputImage: "test.repo/org1/doesnotexist:tag",
			wantErr: errors.New("record malformed"), wantCacheIntents: intentsToMap(testPullIntents())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &cachedRecords{delegate: tt.delegate, intentsLocks: newStripedLockSet(10), intents: tt.initialCache}
			c.intents.authoritative.Store(tt.initAuthoritative)
			got, err := c.ImagePullIntentExists(tt.inputImage)
			if got != tt.want || !cmpErrorStrings(err, tt.wantErr) {
				t.Errorf("ImagePullIntentExists() = %v, %v; want %v, %v", got, err, tt.want, tt.wantErr)
			}
			if err := cmpRecordsMapAndCache(tt.wantCacheIntents, c.intents); err != nil {
				t.Errorf("cache: %v", err)
			}
			if a := c.intents.authoritative.Load(); a != tt.initAuthoritative {
				t.Errorf("authoritative = %v, want %v", a, tt.initAuthoritative)
			}
		})
	}
}

func TestCachedRecordsWriteImagePullIntent(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	justEnough := generateTestPullIntents(100)
	tests := []struct {
		name              string
		delegate          *testRecords
		initialCache      *lruCache[string, intent]
		initAuthoritative bool
		wantAuthoritative bool
		inputImage        string
		wantErr           error
		wantCacheIntents  map[string]*intent
	}{
		{name: "successful write through an empty cache to delegate", delegate: newTestRecords(nil, nil),
			initialCache: newLRUCache[string, intent](100), initAuthoritative: true, wantAuthoritative: true,
			inputImage: "test.repo/org1/project1:tag", wantCacheIntents: intentsToMap([]*intent{{Image: "test.repo/org1/project1:tag"}})},
		{name: "rewrite cached intent, write through to delegate", delegate: newTestRecords(nil, nil),
			initialCache: mapToCache(map[string]*intent{"test.repo/org1/project1:tag": {Image: "something else"}}),
			inputImage:   "test.repo/org1/project1:tag", wantCacheIntents: intentsToMap([]*intent{{Image: "test.repo/org1/project1:tag"}})},
		{name: "write even though the very same intent is already in the cache", delegate: newTestRecords(nil, nil),
			initialCache: mapToCache(map[string]*intent{"test.repo/org1/project1:tag": {Image: "test.repo/org1/project1:tag"}}),
			inputImage:   "test.repo/org1/project1:tag", wantCacheIntents: intentsToMap([]*intent{{Image: "test.repo/org1/project1:tag"}})},
		{name: "write to delegate returns error", delegate: newTestRecords(nil, nil).withNextGetWriteError(errors.New("write error")),
			initialCache: newLRUCache[string, intent](100), inputImage: "test.repo/org1/project1:tag",
			wantCacheIntents: map[string]*intent{}, wantErr: errors.New("write error")},
		{name: "write to cache that's already populated", delegate: newTestRecords(nil, nil),
			initialCache: mapToCache(intentsToMap(testPullIntents())), inputImage: "test.repo/org1/newimage:tag",
			wantCacheIntents: intentsToMap(append(testPullIntents(), &intent{Image: "test.repo/org1/newimage:tag"}))},
		{name: "exceeding the cache size turns it from authoritative to non-authoritative", delegate: newTestRecords(nil, nil),
			initialCache: listToCache(justEnough, pullIntentToCacheKey), initAuthoritative: true,
			inputImage:       "new.repo/neworg/newimage:tag",
			wantCacheIntents: intentsToMap(append(slices.Clone(justEnough[1:]), &intent{Image: "new.repo/neworg/newimage:tag"}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			delegate := &recordingRecords{recordsAccessor: tt.delegate}
			c := &cachedRecords{delegate: delegate, intentsLocks: newStripedLockSet(10), intents: tt.initialCache}
			c.intents.authoritative.Store(tt.initAuthoritative)
			if err := c.WriteImagePullIntent(ctx, tt.inputImage); !cmpErrorStrings(err, tt.wantErr) {
				t.Errorf("WriteImagePullIntent() error = %v, want %v", err, tt.wantErr)
			}
			if err := cmpRecordsMapAndCache(tt.wantCacheIntents, c.intents); err != nil {
				t.Errorf("cache: %v", err)
			}
			if want := []string{"WriteImagePullIntent"}; !reflect.DeepEqual(delegate.methodsCalled, want) {
				t.Errorf("methods called %v, want %v", delegate.methodsCalled, want)
			}
			if a := c.intents.authoritative.Load(); a != tt.wantAuthoritative {
				t.Errorf("authoritative = %v, want %v", a, tt.wantAuthoritative)
			}
		})
	}
}

func TestCachedRecordsWriteImagePulledRecord(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	justEnough := generateTestPulledRecords(100)
	nodeWide := kubeletconfigv1beta1.ImagePullCredentials{NodePodsAccessible: true}
	twoImages := func() *pulled {
		return &pulled{ImageRef: "someref-1", CredentialMapping: map[string]kubeletconfigv1beta1.ImagePullCredentials{
			"test.repo/org1/project1": nodeWide,
			"test.repo/org2/project1": {KubernetesSecrets: []kubeletconfigv1beta1.ImagePullSecret{
				{Namespace: "ns1", Name: "secret1", UID: "uid1", CredentialHash: "somehash"}}},
		}}
	}
	tests := []struct {
		name              string
		delegate          *testRecords
		initialCache      *lruCache[string, pulled]
		initAuthoritative bool
		wantAuthoritative bool
		inputRecord       *pulled
		wantErr           error
		wantCache         map[string]*pulled
	}{
		{name: "successful write through an empty cache to delegate", delegate: newTestRecords(nil, nil),
			initialCache: newLRUCache[string, pulled](100), inputRecord: &pulled{ImageRef: "someref-1"},
			initAuthoritative: true, wantAuthoritative: true, wantCache: pulledRecordsToMap([]*pulled{{ImageRef: "someref-1"}})},
		{name: "rewrite cached pulled record, write through to delegate", delegate: newTestRecords(nil, nil),
			initialCache: mapToCache(map[string]*pulled{"someref-1": {ImageRef: "someref-1",
				CredentialMapping: map[string]kubeletconfigv1beta1.ImagePullCredentials{"test.repo/org1/project1": nodeWide}}}),
			inputRecord: twoImages(), wantCache: pulledRecordsToMap([]*pulled{twoImages()})},
		{name: "write even though the same pulled record is already in the cache", delegate: newTestRecords(nil, nil),
			initialCache: mapToCache(map[string]*pulled{"someref-1": {ImageRef: "someref-1"}}),
			inputRecord:  &pulled{ImageRef: "someref-1"}, wantCache: pulledRecordsToMap([]*pulled{{ImageRef: "someref-1"}})},
		{name: "write to delegate returns error", delegate: newTestRecords(nil, nil).withNextGetWriteError(errors.New("write error")),
			initialCache: newLRUCache[string, pulled](100), inputRecord: &pulled{ImageRef: "someref-1"},
			wantCache: map[string]*pulled{}, wantErr: errors.New("write error")},
		{name: "write to cache that's already populated", delegate: newTestRecords(nil, nil),
			initialCache: mapToCache(pulledRecordsToMap(testPulledRecords())), inputRecord: &pulled{ImageRef: "newref"},
			wantCache: pulledRecordsToMap(append(testPulledRecords(), &pulled{ImageRef: "newref"}))},
		{name: "exceeding the cache size turns it from authoritative to non-authoritative", delegate: newTestRecords(nil, nil),
			initialCache: listToCache(justEnough, pulledRecordToCacheKey), initAuthoritative: true,
			inputRecord: &pulled{ImageRef: "newref"},
			wantCache:   pulledRecordsToMap(append(slices.Clone(justEnough[1:]), &pulled{ImageRef: "newref"}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			delegate := &recordingRecords{recordsAccessor: tt.delegate}
			c := &cachedRecords{delegate: delegate, pulledRecordsLocks: newStripedLockSet(10), pulledRecords: tt.initialCache}
			c.pulledRecords.authoritative.Store(tt.initAuthoritative)
			if err := c.WriteImagePulledRecord(ctx, tt.inputRecord); !cmpErrorStrings(err, tt.wantErr) {
				t.Errorf("WriteImagePulledRecord() error = %v, want %v", err, tt.wantErr)
			}
			if err := cmpRecordsMapAndCache(tt.wantCache, c.pulledRecords); err != nil {
				t.Errorf("cache: %v", err)
			}
			if want := []string{"WriteImagePulledRecord"}; !reflect.DeepEqual(delegate.methodsCalled, want) {
				t.Errorf("methods called %v, want %v", delegate.methodsCalled, want)
			}
			if a := c.pulledRecords.authoritative.Load(); a != tt.wantAuthoritative {
				t.Errorf("authoritative = %v, want %v", a, tt.wantAuthoritative)
			}
		})
	}
}

func TestCachedRecordsDeleteImagePullIntent(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	tests := []struct {
		name        string
		delegate    func() *testRecords
		inputImage  string
		wantErr     error
		wantIntents map[string]*intent
	}{
		{name: "delete an existing intent from the cache", delegate: func() *testRecords { return newTestRecords(testPullIntents(), nil) },
			inputImage: "test.repo/org1/project1:tag", wantIntents: deleteFromStringMap(intentsToMap(testPullIntents()), "test.repo/org1/project1:tag")},
		{name: "attempt to delete a non-existent intent from the cache", delegate: func() *testRecords { return newTestRecords(testPullIntents(), nil) },
			inputImage: "test.repo/org1/doesnotexist:tag", wantIntents: intentsToMap(testPullIntents())},
		{name: "error deleting an intent from delegate", delegate: func() *testRecords {
			return newTestRecords(testPullIntents(), nil).withNextGetWriteError(errors.New("error deleting intent"))
		}, inputImage: "test.repo/org1/project1:tag", wantIntents: intentsToMap(testPullIntents()), wantErr: errors.New("error deleting intent")},
	}
	for _, tt := range tests {
		for _, initAuthoritative := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, authoritative=%v", tt.name, initAuthoritative), func(t *testing.T) {
				delegate := tt.delegate()
				c := &cachedRecords{delegate: delegate, intentsLocks: newStripedLockSet(10), intents: mapToCache(intentsToMap(testPullIntents()))}
				c.intents.authoritative.Store(initAuthoritative)
				if err := c.DeleteImagePullIntent(ctx, tt.inputImage); !cmpErrorStrings(err, tt.wantErr) {
					t.Errorf("DeleteImagePullIntent() error = %v, want %v", err, tt.wantErr)
				}
				c.intents.deletingKeys.Range(func(key, _ any) bool {
					t.Errorf("key %v is still in deletingKeys", key)
					return true
				})
				if err := cmpRecordsMapAndCache(tt.wantIntents, c.intents); err != nil {
					t.Errorf("cache: %v", err)
				}
				if !reflect.DeepEqual(delegate.intents, tt.wantIntents) {
					t.Errorf("delegate intents = %v, want %v", delegate.intents, tt.wantIntents)
				}
				if a := c.intents.authoritative.Load(); a != initAuthoritative {
					t.Errorf("authoritative = %v, want it unchanged", a)
				}
			})
		}
	}
}

func TestCachedRecordsDeleteImagePulledRecord(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	tests := []struct {
		name       string
		delegate   func() *testRecords
		imageRef   string
		wantErr    error
		wantRecord map[string]*pulled
	}{
		{name: "delete an existing pulled record from the cache", delegate: func() *testRecords { return newTestRecords(nil, testPulledRecords()) },
			imageRef: "ref-22", wantRecord: deleteFromStringMap(pulledRecordsToMap(testPulledRecords()), "ref-22")},
		{name: "attempt to delete a non-existent imagePulledRecord from the cache", delegate: func() *testRecords { return newTestRecords(nil, testPulledRecords()) },
			imageRef: "non-existent-ref", wantRecord: pulledRecordsToMap(testPulledRecords())},
		{name: "error deleting an imagePulledRecord from delegate", delegate: func() *testRecords {
			return newTestRecords(nil, testPulledRecords()).withNextGetWriteError(errors.New("error deleting imagePulledRecord"))
		}, imageRef: "ref-22", wantRecord: pulledRecordsToMap(testPulledRecords()), wantErr: errors.New("error deleting imagePulledRecord")},
	}
	for _, tt := range tests {
		for _, initAuthoritative := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, authoritative=%v", tt.name, initAuthoritative), func(t *testing.T) {
				delegate := tt.delegate()
				c := &cachedRecords{delegate: delegate, pulledRecordsLocks: newStripedLockSet(10), pulledRecords: mapToCache(pulledRecordsToMap(testPulledRecords()))}
				c.pulledRecords.authoritative.Store(initAuthoritative)
				if err := c.DeleteImagePulledRecord(ctx, tt.imageRef); !cmpErrorStrings(err, tt.wantErr) {
					t.Errorf("DeleteImagePulledRecord() error = %v, want %v", err, tt.wantErr)
				}
				c.pulledRecords.deletingKeys.Range(func(key, _ any) bool {
					t.Errorf("key %v is still in deletingKeys", key)
					return true
				})
				if err := cmpRecordsMapAndCache(tt.wantRecord, c.pulledRecords); err != nil {
					t.Errorf("cache: %v", err)
				}
				if !reflect.DeepEqual(delegate.pulledRecords, tt.wantRecord) {
					t.Errorf("delegate records = %v, want %v", delegate.pulledRecords, tt.wantRecord)
				}
				if a := c.pulledRecords.authoritative.Load(); a != initAuthoritative {
					t.Errorf("authoritative = %v, want it unchanged", a)
				}
			})
		}
	}
}

func TestCachedRecordsGetImagePulledRecord(t *testing.T) {
	readErr := errors.New("error reading pulled record")
	tests := []struct {
		name              string
		delegate          recordsAccessor
		cached            *lruCache[string, pulled]
		initAuthoritative bool
		imageRef          string
		wantRecord        *pulled
		wantExists        bool
		wantErr           error
		wantCache         map[string]*pulled
	}{
		{name: "pulled record exists in cache", delegate: newTestRecords(nil, nil), cached: mapToCache(pulledRecordsToMap(testPulledRecords())),
			initAuthoritative: true, imageRef: "ref-009", wantRecord: pulledRecordsToMap(testPulledRecords())["ref-009"], wantExists: true,
			wantCache: pulledRecordsToMap(testPulledRecords())},
		{name: "pulled record exists in delegate, nonauthoritative cache gets updated", delegate: newTestRecords(nil, testPulledRecords()),
			cached:   mapToCache(deleteFromStringMap(pulledRecordsToMap(testPulledRecords()), "ref-22")),
			imageRef: "ref-22", wantRecord: pulledRecordsToMap(testPulledRecords())["ref-22"], wantExists: true,
			wantCache: pulledRecordsToMap(testPulledRecords())},
		{name: "pulled record exists in delegate, authoritative cache return not found", delegate: newTestRecords(nil, testPulledRecords()),
			cached:            mapToCache(deleteFromStringMap(pulledRecordsToMap(testPulledRecords()), "ref-22")),
			initAuthoritative: true, imageRef: "ref-22",
			wantCache: deleteFromStringMap(pulledRecordsToMap(testPulledRecords()), "ref-22")},
		{name: "pulled record does not exist", delegate: newTestRecords(nil, nil),
			cached:   mapToCache(deleteFromStringMap(pulledRecordsToMap(testPulledRecords()), "ref-87")),
			imageRef: "ref-87", wantCache: deleteFromStringMap(pulledRecordsToMap(testPulledRecords()), "ref-87")},
		{name: "pulled record not cached and not in delegate, delegate returns error on read", delegate: newTestRecords(nil, nil).withNextGetWriteError(readErr),
			cached: newLRUCache[string, pulled](100), imageRef: "doesnotexist", wantErr: readErr, wantCache: map[string]*pulled{}},
		{name: "pulled record not cached, exists in delegate, delegate returns error", delegate: newTestRecords(nil, testPulledRecords()).withNextGetWriteError(readErr),
			cached: newLRUCache[string, pulled](100), imageRef: "ref-3", wantExists: true, wantErr: readErr, wantCache: map[string]*pulled{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &cachedRecords{delegate: tt.delegate, pulledRecordsLocks: newStripedLockSet(10), pulledRecords: tt.cached}
			c.pulledRecords.authoritative.Store(tt.initAuthoritative)
			got, exists, err := c.GetImagePulledRecord(tt.imageRef)
			if !reflect.DeepEqual(got, tt.wantRecord) || exists != tt.wantExists || !cmpErrorStrings(err, tt.wantErr) {
				t.Errorf("GetImagePulledRecord() = %v, %v, %v; want %v, %v, %v", got, exists, err, tt.wantRecord, tt.wantExists, tt.wantErr)
			}
			if err := cmpRecordsMapAndCache(tt.wantCache, c.pulledRecords); err != nil {
				t.Errorf("cache: %v", err)
			}
			if a := c.pulledRecords.authoritative.Load(); a != tt.initAuthoritative {
				t.Errorf("authoritative = %v, want %v", a, tt.initAuthoritative)
			}
		})
	}
}

func testPullIntents() []*intent {
	return []*intent{
		{Image: "test.repo/org1/project2:tag"},
		{Image: "test.repo/org1/project1:tag"},
		{Image: "test.repo/org1/project3:tag"},
		{Image: "test.repo/org2/project1:tag"},
	}
}

// generateTestPullIntents are n distinct intents, in no particular order.
func generateTestPullIntents(n int) []*intent {
	ret := make([]*intent, 0, n)
	for i := range n {
		ret = append(ret, &intent{Image: fmt.Sprintf("test.repo/org%d/project%d:tag", i, (i*7919)%10000)})
	}
	return ret
}

func testPulledRecords() []*pulled {
	nodeWide := func(image string) map[string]kubeletconfigv1beta1.ImagePullCredentials {
		return map[string]kubeletconfigv1beta1.ImagePullCredentials{image: {NodePodsAccessible: true}}
	}
	return []*pulled{
		{ImageRef: "ref-87", CredentialMapping: nodeWide("image.some/org1/imagex")},
		{ImageRef: "ref-3", CredentialMapping: nodeWide("image.some/org2/image")},
		{ImageRef: "ref-22", CredentialMapping: map[string]kubeletconfigv1beta1.ImagePullCredentials{
			"image.some/org1/image-2": {KubernetesSecrets: []kubeletconfigv1beta1.ImagePullSecret{
				{Namespace: "ns1", Name: "secret1", UID: "uid1", CredentialHash: "somehash"}}},
		}},
		{ImageRef: "ref-17", CredentialMapping: nodeWide("image.some/org1/image-3")},
		{ImageRef: "ref-009", CredentialMapping: nodeWide("image.some/org3/image")},
	}
}

func generateTestPulledRecords(n int) []*pulled {
	ret := make([]*pulled, 0, n)
	for i := range n {
		ret = append(ret, &pulled{ImageRef: fmt.Sprintf("ref-%d", i), CredentialMapping: map[string]kubeletconfigv1beta1.ImagePullCredentials{
			fmt.Sprintf("image.some/org%d/image%d", (i*31)%97, i): {NodePodsAccessible: true},
		}})
	}
	return ret
}

func intentsToMap(intents []*intent) map[string]*intent {
	ret := make(map[string]*intent, len(intents))
	for _, i := range intents {
		ret[i.Image] = i
	}
	return ret
}

func pulledRecordsToMap(records []*pulled) map[string]*pulled {
	ret := make(map[string]*pulled, len(records))
	for _, r := range records {
		ret[r.ImageRef] = r
	}
	return ret
}

func mapToCache[V any](m map[string]*V) *lruCache[string, V] {
	ret := newLRUCache[string, V](100)
	for k, v := range m {
		ret.Set(k, v)
	}
	return ret
}

// listToCache fills the cache in order, so tests can tell what gets evicted.
func listToCache[V any](l []*V, recordToKey func(*V) string) *lruCache[string, V] {
	ret := newLRUCache[string, V](100)
	for _, v := range l {
		ret.Set(recordToKey(v), v)
	}
	return ret
}

func testPullIntentsSorted() []*intent {
	ret := testPullIntents()
	slices.SortFunc(ret, pullIntentsCmp)
	return ret
}

func testPulledRecordsSorted() []*pulled {
	ret := testPulledRecords()
	slices.SortFunc(ret, pulledRecordsCmp)
	return ret
}

func cmpErrorStrings(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
}

func deleteFromStringMap[V any](m map[string]V, key string) map[string]V {
	delete(m, key)
	return m
}

func cmpRecordsMapAndCache[V any](m map[string]*V, c *lruCache[string, V]) error {
	if len(m) != c.Len() {
		return fmt.Errorf("length mismatch: map has %d items, cache has %d items", len(m), c.Len())
	}
	for k, v := range m {
		if got, exists := c.Get(k); !exists || !reflect.DeepEqual(v, got) {
			return fmt.Errorf("key %q mismatch: %v != %v", k, v, got)
		}
	}
	return nil
}

func pullIntentsCmp(a, b *intent) int   { return strings.Compare(a.Image, b.Image) }
func pulledRecordsCmp(a, b *pulled) int { return strings.Compare(a.ImageRef, b.ImageRef) }
