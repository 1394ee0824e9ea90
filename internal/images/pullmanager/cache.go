package pullmanager

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/lru"
)

// The caps of the in-memory caches, as upstream.
const (
	maxIntentsCacheSize       = 1024
	maxPulledRecordsCacheSize = 2000
)

type lruCache[K comparable, V any] struct {
	cache   *lru.Cache
	maxSize int
	// authoritative says the cache holds every record: false once a record
	// was evicted for capacity or the initial list failed.
	authoritative atomic.Bool
	// deletingKeys tells the eviction function that a key is being deleted,
	// not evicted. Only Delete changes it.
	deletingKeys sync.Map
}

func newLRUCache[K comparable, V any](size int) *lruCache[K, V] {
	c := lru.New(size)
	l := &lruCache[K, V]{maxSize: size, cache: c}
	if err := c.SetEvictionFunc(func(key lru.Key, _ any) {
		if _, deleting := l.deletingKeys.Load(key); deleting {
			return
		}
		l.authoritative.Store(false)
	}); err != nil {
		panic(fmt.Sprintf("failed to set eviction function to the LRU cache: %v", err))
	}
	return l
}

func (c *lruCache[K, V]) Get(key K) (*V, bool) {
	value, found := c.cache.Get(key)
	if !found {
		return nil, false
	}
	if value == nil {
		return nil, true
	}
	return value.(*V), true
}

func (c *lruCache[K, V]) Set(key K, value *V) { c.cache.Add(key, value) }
func (c *lruCache[K, V]) Len() int            { return c.cache.Len() }
func (c *lruCache[K, V]) Clear()              { c.cache.Clear() }

// Delete removes key without changing the authoritative status. The caller
// holds the write lock of key.
func (c *lruCache[K, V]) Delete(key K) {
	c.deletingKeys.Store(key, struct{}{})
	defer c.deletingKeys.Delete(key)
	c.cache.Remove(key)
}

// cachedRecords is a write-through cache over another recordsAccessor.
type cachedRecords struct {
	delegate recordsAccessor

	intentsLocks       *stripedLockSet
	intents            *lruCache[string, kubeletconfigv1beta1.ImagePullIntent]
	pulledRecordsLocks *stripedLockSet
	pulledRecords      *lruCache[string, kubeletconfigv1beta1.ImagePulledRecord]
}

// newCachedRecords caches up to intentsCacheSize intents (at most 1024) and
// pulledRecordsCacheSize pulled records (at most 2000), both positive, and
// warms the caches.
func newCachedRecords(ctx context.Context, delegate recordsAccessor, intentsCacheSize, pulledRecordsCacheSize, stripedLocksSize int32, m *metrics) recordsAccessor {
	logger := klog.FromContext(ctx)
	c := &cachedRecords{
		delegate:           delegate,
		intentsLocks:       newStripedLockSet(stripedLocksSize),
		intents:            newLRUCache[string, kubeletconfigv1beta1.ImagePullIntent](int(min(intentsCacheSize, maxIntentsCacheSize))),
		pulledRecordsLocks: newStripedLockSet(stripedLocksSize),
		pulledRecords:      newLRUCache[string, kubeletconfigv1beta1.ImagePulledRecord](int(min(pulledRecordsCacheSize, maxPulledRecordsCacheSize))),
	}
	if _, err := c.ListImagePullIntents(); err != nil {
		logger.Info("there was an error initializing the image pull intents cache, the cache will work in a non-authoritative mode until the intents are listed successfully", "error", err)
	}
	if _, err := c.ListImagePulledRecords(); err != nil {
		logger.Info("there was an error initializing the image pulled records cache, the cache will work in a non-authoritative mode until the pulled records are listed successfully", "error", err)
	}
	return &meteringRecords{sizedRecords: c, intents: m.memIntents, pulledRecords: m.memPulledRecords}
}

func (c *cachedRecords) ListImagePullIntents() ([]*kubeletconfigv1beta1.ImagePullIntent, error) {
	return cacheRefreshingList(c.intents, c.intentsLocks, c.delegate.ListImagePullIntents, pullIntentToCacheKey)
}

func (c *cachedRecords) ImagePullIntentExists(image string) (bool, error) {
	if _, exists := c.intents.Get(image); exists {
		return true, nil
	}
	c.intentsLocks.Lock(image)
	defer c.intentsLocks.Unlock(image)
	if _, exists := c.intents.Get(image); exists {
		return true, nil
	}
	if c.intents.authoritative.Load() {
		return false, nil
	}
	exists, err := c.delegate.ImagePullIntentExists(image)
	if err == nil && exists {
		c.intents.Set(image, &kubeletconfigv1beta1.ImagePullIntent{Image: image})
	}
	return exists, err
}

func (c *cachedRecords) WriteImagePullIntent(ctx context.Context, image string) error {
	c.intentsLocks.Lock(image)
	defer c.intentsLocks.Unlock(image)
	if err := c.delegate.WriteImagePullIntent(ctx, image); err != nil {
		return err
	}
	c.intents.Set(image, &kubeletconfigv1beta1.ImagePullIntent{Image: image})
	return nil
}

func (c *cachedRecords) DeleteImagePullIntent(ctx context.Context, image string) error {
	c.intentsLocks.Lock(image)
	defer c.intentsLocks.Unlock(image)
	if err := c.delegate.DeleteImagePullIntent(ctx, image); err != nil {
		return err
	}
	c.intents.Delete(image)
	return nil
}

func (c *cachedRecords) ListImagePulledRecords() ([]*kubeletconfigv1beta1.ImagePulledRecord, error) {
	return cacheRefreshingList(c.pulledRecords, c.pulledRecordsLocks, c.delegate.ListImagePulledRecords, pulledRecordToCacheKey)
}

func (c *cachedRecords) GetImagePulledRecord(imageRef string) (*kubeletconfigv1beta1.ImagePulledRecord, bool, error) {
	if record, exists := c.pulledRecords.Get(imageRef); exists {
		return record, true, nil
	}
	c.pulledRecordsLocks.Lock(imageRef)
	defer c.pulledRecordsLocks.Unlock(imageRef)
	if record, exists := c.pulledRecords.Get(imageRef); exists {
		return record, true, nil
	}
	if c.pulledRecords.authoritative.Load() {
		return nil, false, nil
	}
	record, exists, err := c.delegate.GetImagePulledRecord(imageRef)
	if err == nil && exists {
		c.pulledRecords.Set(imageRef, record)
	}
	return record, exists, err
}

func (c *cachedRecords) WriteImagePulledRecord(ctx context.Context, record *kubeletconfigv1beta1.ImagePulledRecord) error {
	c.pulledRecordsLocks.Lock(record.ImageRef)
	defer c.pulledRecordsLocks.Unlock(record.ImageRef)
	if err := c.delegate.WriteImagePulledRecord(ctx, record); err != nil {
		return err
	}
	c.pulledRecords.Set(record.ImageRef, record)
	return nil
}

func (c *cachedRecords) DeleteImagePulledRecord(ctx context.Context, imageRef string) error {
	c.pulledRecordsLocks.Lock(imageRef)
	defer c.pulledRecordsLocks.Unlock(imageRef)
	if err := c.delegate.DeleteImagePulledRecord(ctx, imageRef); err != nil {
		return err
	}
	c.pulledRecords.Delete(imageRef)
	return nil
}

// intentsSize and pulledRecordsSize are the caches' usage in percent.
func (c *cachedRecords) intentsSize() (uint, error) {
	return uint(c.intents.Len() * 100 / c.intents.maxSize), nil
}

func (c *cachedRecords) pulledRecordsSize() (uint, error) {
	return uint(c.pulledRecords.Len() * 100 / c.pulledRecords.maxSize), nil
}

// cacheRefreshingList lists the delegate's records; a non-authoritative
// cache is refilled from the list, and becomes authoritative if the list is
// complete and fits.
func cacheRefreshingList[K comparable, V any](cache *lruCache[K, V], delegateLocks *stripedLockSet, list func() ([]*V, error), recordToKey func(*V) K) ([]*V, error) {
	wasAuthoritative := cache.authoritative.Load()
	if !wasAuthoritative {
		delegateLocks.GlobalLock()
		defer delegateLocks.GlobalUnlock()
	}
	results, err := list()
	if wasAuthoritative {
		return results, err
	}
	authoritative := err == nil && len(results) < cache.maxSize
	if authoritative || cache.Len() == 0 {
		cache.Clear()
		for _, record := range results[:min(len(results), cache.maxSize)] {
			cache.Set(recordToKey(record), record)
		}
		cache.authoritative.Store(authoritative)
	}
	return results, err
}

func pullIntentToCacheKey(intent *kubeletconfigv1beta1.ImagePullIntent) string {
	return intent.Image
}

func pulledRecordToCacheKey(record *kubeletconfigv1beta1.ImagePulledRecord) string {
	return record.ImageRef
}
