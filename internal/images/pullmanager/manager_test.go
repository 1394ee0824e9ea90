package pullmanager

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2/ktesting"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/ctortest"
)

type (
	creds = kubeletconfigv1beta1.ImagePullCredentials
	sec   = kubeletconfigv1beta1.ImagePullSecret
	sa    = kubeletconfigv1beta1.ImagePullServiceAccount
)

// testNow is the fake clock's time, after every record of testdata.
var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type fakeImages []*runtimeapi.Image

func (f fakeImages) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return f, nil
}

func testManager(records recordsAccessor, policy requireVerification, images ImageLister) *Manager {
	return newManager(records, policy, images, 10, clocktesting.NewFakeClock(testNow), newMetrics(nil))
}

// testFSRecords are the records in dir/pulling and dir/pulled, with the
// files of testdata given.
func testFSRecords(t *testing.T, pulling, pulledFiles []string) *fsRecords {
	dir := t.TempDir()
	f := &fsRecords{pullingDir: filepath.Join(dir, "pulling"), pulledDir: filepath.Join(dir, "pulled")}
	for _, d := range []string{f.pullingDir, f.pulledDir} {
		if err := os.MkdirAll(d, 0700); err != nil {
			t.Fatal(err)
		}
	}
	teeTestData(t, f.pullingDir, "pulling", pulling)
	teeTestData(t, f.pulledDir, "pulled", pulledFiles)
	return f
}

func dirFiles(t *testing.T, dir string) sets.Set[string] {
	t.Helper()
	got := sets.New[string]()
	if err := processDirFiles(dir, func(p string, _ []byte) error { got.Insert(filepath.Base(p)); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestNew(t *testing.T) {
	ok := func() Config {
		return Config{RootDir: t.TempDir(), Images: fakeImages{}, MaxPods: 110}
	}
	with := func(f func(*Config)) Config { c := ok(); f(&c); return c }
	_, ctx := ktesting.NewTestContext(t)
	ctortest.Run(t, func(c Config) (*Manager, error) { return New(ctx, c) }, []ctortest.Case[Config]{
		{Name: "no root dir", Config: with(func(c *Config) { c.RootDir = "" }), WantErr: "Config.RootDir is required"},
		{Name: "no images", Config: with(func(c *Config) { c.Images = nil }), WantErr: "Config.Images is required"},
		{Name: "no max pods", Config: with(func(c *Config) { c.MaxPods = 0 }), WantErr: "Config.MaxPods 0 must be positive"},
		{Name: "negative parallel pulls", Config: with(func(c *Config) { c.MaxParallelImagePulls = -1 }), WantErr: "must not be negative"},
		{Name: "unknown policy", Config: with(func(c *Config) { c.Policy = "Sometimes" }), WantErr: "unknown image pull credential verification policy: Sometimes"},
		{Name: "bad allowlist", Config: with(func(c *Config) {
			c.Policy, c.Allowlist = kubeletconfigv1beta1.NeverVerifyAllowlistedImages, []string{"a.io/*/b"}
		}), WantErr: "only patterns ending with '/*' are allowed"},
		{Name: "defaults", Config: ok()},
	}, func(t *testing.T, m *Manager) {
		ctortest.RealClock(t, m.clock)
		if !m.policy("a", true) || m.policy("a", false) {
			t.Error("the policy is not NeverVerifyPreloadedImages")
		}
		c := m.records.(*meteringRecords).sizedRecords.(*cachedRecords)
		if c.intents.maxSize != 220 || c.pulledRecords.maxSize != 550 || len(m.intentLocks.locks) != 1 {
			t.Errorf("cache sizes %d, %d, %d lock stripes; want 220, 550, 1", c.intents.maxSize, c.pulledRecords.maxSize, len(m.intentLocks.locks))
		}
	})
}

// TestManagerRestart runs the whole stack over the files: what a run
// records, the next one (or an upstream kubelet) finds.
func TestManagerRestart(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	images := fakeImages{{Id: "sha256:aaa", RepoTags: []string{"registry.io/app:v1"}}}
	cfg := Config{RootDir: dir, Images: images, MaxPods: 10, MaxParallelImagePulls: 5, Clock: clocktesting.NewFakeClock(testNow)}
	m, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	secret := sec{UID: "u1", Namespace: "ns", Name: "pull", CredentialHash: CredentialHash("user", "pass", "")}
	podCreds := func(s ...sec) GetPodCredentials {
		return func() ([]sec, *sa, error) { return s, nil, nil }
	}
	if err := m.RecordPullIntent(ctx, "registry.io/app:v1"); err != nil {
		t.Fatal(err)
	}
	m.RecordImagePulled(ctx, "registry.io/app:v1", "sha256:aaa", &creds{KubernetesSecrets: []sec{secret}})
	// a pull interrupted by the restart
	if err := m.RecordPullIntent(ctx, "registry.io/other:v2"); err != nil {
		t.Fatal(err)
	}

	images = append(images, &runtimeapi.Image{Id: "sha256:bbb", RepoDigests: []string{"registry.io/other@sha256:ccc"}, RepoTags: []string{"registry.io/other:v2"}})
	cfg.Images = images
	m, err = New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := dirFiles(t, filepath.Join(dir, "image_manager", "pulling")); got.Len() != 0 {
		t.Errorf("intents left after the restart: %v", sets.List(got))
	}
	for _, tc := range []struct {
		image, ref string
		creds      GetPodCredentials
		want       bool
	}{
		{"registry.io/app:v1", "sha256:aaa", podCreds(secret), false},
		{"registry.io/app:v1", "sha256:aaa", podCreds(), true},
		{"registry.io/app:latest", "sha256:aaa", podCreds(sec{UID: "u2", Namespace: "other", Name: "x", CredentialHash: secret.CredentialHash}), false},
		// pulled by the kubelet, credentials unknown
		{"registry.io/other:v2", "sha256:bbb", podCreds(secret), true},
		// not pulled by the kubelet: preloaded
		{"registry.io/preloaded:v1", "sha256:ddd", nil, false},
	} {
		if got, err := m.MustAttemptImagePull(ctx, tc.image, tc.ref, tc.creds); err != nil || got != tc.want {
			t.Errorf("MustAttemptImagePull(%q, %q) = %v, %v; want %v", tc.image, tc.ref, got, err, tc.want)
		}
	}
	// the secret matched by hash was remembered with its coordinates
	rec, _, err := m.records.GetImagePulledRecord("sha256:aaa")
	if err != nil || len(rec.CredentialMapping["registry.io/app"].KubernetesSecrets) != 2 {
		t.Errorf("record %+v, %v; want two secrets", rec, err)
	}

	m.PruneUnknownRecords(ctx, []string{"sha256:aaa"}, testNow.Add(time.Second))
	if got, want := dirFiles(t, filepath.Join(dir, "image_manager", "pulled")), sets.New(cacheFilename("sha256:aaa")); !got.Equal(want) {
		t.Errorf("pulled records after pruning: %v, want %v", sets.List(got), sets.List(want))
	}
}

func TestPulledRecordMergeNewCreds(t *testing.T) {
	testTime := metav1.NewTime(time.Date(2022, 2, 22, 12, 0, 0, 0, time.UTC))
	testRecord := func() *pulled {
		return &pulled{
			ImageRef:        "testImageRef",
			LastUpdatedTime: testTime,
			CredentialMapping: map[string]creds{
				"test-image1": {KubernetesSecrets: []sec{{UID: "uid1", Namespace: "namespace1", Name: "name1", CredentialHash: "hash1"}}},
				"test-image2": {KubernetesSecrets: []sec{
					{UID: "uid1", Namespace: "namespace1", Name: "name1", CredentialHash: "hash1"},
					{UID: "uid2", Namespace: "namespace2", Name: "name2", CredentialHash: "hash2"},
				}},
				"test-image-with-sa": {KubernetesServiceAccounts: []sa{{UID: "sa-uid1", Namespace: "default", Name: "sa1"}}},
				"test-image-mixed": {
					KubernetesSecrets:         []sec{{UID: "secret-uid1", Namespace: "kube-system", Name: "secret1", CredentialHash: "secret-hash1"}},
					KubernetesServiceAccounts: []sa{{UID: "sa-uid2", Namespace: "kube-system", Name: "sa2"}},
				},
				"test-nodewide": {NodePodsAccessible: true},
			},
		}
	}
	with := func(image string, c creds) *pulled {
		r := testRecord()
		r.CredentialMapping[image] = c
		return r
	}
	tests := []struct {
		name  string
		image string
		merge *creds
		want  *pulled // nil: no update
	}{
		{name: "create a new image record", image: "new-image",
			merge: &creds{KubernetesSecrets: []sec{{UID: "newuid", Namespace: "newnamespace", Name: "newname", CredentialHash: "newhash"}}},
			want:  with("new-image", creds{KubernetesSecrets: []sec{{UID: "newuid", Namespace: "newnamespace", Name: "newname", CredentialHash: "newhash"}}})},
		{name: "merge with an existing image secret", image: "test-image1",
			merge: &creds{KubernetesSecrets: []sec{{UID: "newuid", Namespace: "newnamespace", Name: "newname", CredentialHash: "newhash"}}},
			want: with("test-image1", creds{KubernetesSecrets: []sec{
				{UID: "uid1", Namespace: "namespace1", Name: "name1", CredentialHash: "hash1"},
				{UID: "newuid", Namespace: "newnamespace", Name: "newname", CredentialHash: "newhash"},
			}})},
		{name: "merge with existing image record secrets", image: "test-image2",
			merge: &creds{KubernetesSecrets: []sec{{UID: "newuid", Namespace: "namespace1", Name: "newname", CredentialHash: "newhash"}}},
			want: with("test-image2", creds{KubernetesSecrets: []sec{
				{UID: "uid1", Namespace: "namespace1", Name: "name1", CredentialHash: "hash1"},
				{UID: "newuid", Namespace: "namespace1", Name: "newname", CredentialHash: "newhash"},
				{UID: "uid2", Namespace: "namespace2", Name: "name2", CredentialHash: "hash2"},
			}})},
		{name: "node-accessible overrides all secrets", image: "test-image2", merge: &creds{NodePodsAccessible: true},
			want: with("test-image2", creds{NodePodsAccessible: true})},
		{name: "new creds have the same secret coordinates but a different hash", image: "test-image2",
			merge: &creds{KubernetesSecrets: []sec{{UID: "uid2", Namespace: "namespace2", Name: "name2", CredentialHash: "newhash"}}},
			want: with("test-image2", creds{KubernetesSecrets: []sec{
				{UID: "uid1", Namespace: "namespace1", Name: "name1", CredentialHash: "hash1"},
				{UID: "uid2", Namespace: "namespace2", Name: "name2", CredentialHash: "newhash"},
			}})},
		{name: "new creds have the same hash but a different coordinates", image: "test-image2",
			merge: &creds{KubernetesSecrets: []sec{{UID: "uid3", Namespace: "namespace2", Name: "name3", CredentialHash: "hash2"}}},
			want: with("test-image2", creds{KubernetesSecrets: []sec{
				{UID: "uid1", Namespace: "namespace1", Name: "name1", CredentialHash: "hash1"},
				{UID: "uid2", Namespace: "namespace2", Name: "name2", CredentialHash: "hash2"},
				{UID: "uid3", Namespace: "namespace2", Name: "name3", CredentialHash: "hash2"},
			}})},
		{name: "create a new image record with service accounts", image: "new-sa-image",
			merge: &creds{KubernetesServiceAccounts: []sa{{UID: "new-sa-uid", Namespace: "default", Name: "new-sa"}}},
			want:  with("new-sa-image", creds{KubernetesServiceAccounts: []sa{{UID: "new-sa-uid", Namespace: "default", Name: "new-sa"}}})},
		{name: "merge with existing service account", image: "test-image-with-sa",
			merge: &creds{KubernetesServiceAccounts: []sa{{UID: "new-sa-uid", Namespace: "kube-system", Name: "new-sa"}}},
			want: with("test-image-with-sa", creds{KubernetesServiceAccounts: []sa{
				{UID: "sa-uid1", Namespace: "default", Name: "sa1"}, {UID: "new-sa-uid", Namespace: "kube-system", Name: "new-sa"}}})},
		{name: "no update when service account is identical", image: "test-image-with-sa",
			merge: &creds{KubernetesServiceAccounts: []sa{{UID: "sa-uid1", Namespace: "default", Name: "sa1"}}}},
		{name: "add service account to image with only secrets", image: "test-image2",
			merge: &creds{KubernetesServiceAccounts: []sa{{UID: "new-sa-uid", Namespace: "default", Name: "new-sa"}}},
			want: with("test-image2", creds{
				KubernetesSecrets: []sec{
					{UID: "uid1", Namespace: "namespace1", Name: "name1", CredentialHash: "hash1"},
					{UID: "uid2", Namespace: "namespace2", Name: "name2", CredentialHash: "hash2"},
				},
				KubernetesServiceAccounts: []sa{{UID: "new-sa-uid", Namespace: "default", Name: "new-sa"}},
			})},
		{name: "add secret to image with only service accounts", image: "test-image-with-sa",
			merge: &creds{KubernetesSecrets: []sec{{UID: "new-secret-uid", Namespace: "default", Name: "new-secret", CredentialHash: "new-secret-hash"}}},
			want: with("test-image-with-sa", creds{
				KubernetesSecrets:         []sec{{UID: "new-secret-uid", Namespace: "default", Name: "new-secret", CredentialHash: "new-secret-hash"}},
				KubernetesServiceAccounts: []sa{{UID: "sa-uid1", Namespace: "default", Name: "sa1"}},
			})},
		{name: "node-accessible overrides mixed credentials", image: "test-image-mixed", merge: &creds{NodePodsAccessible: true},
			want: with("test-image-mixed", creds{NodePodsAccessible: true})},
		{name: "no update when image already marked as node-accessible with secrets", image: "test-nodewide",
			merge: &creds{KubernetesSecrets: []sec{{UID: "any-uid", Namespace: "any-namespace", Name: "any-name", CredentialHash: "any-hash"}}}},
		{name: "no update when trying to add service account to node-accessible image", image: "test-nodewide",
			merge: &creds{KubernetesServiceAccounts: []sa{{UID: "any-sa-uid", Namespace: "any-namespace", Name: "any-sa"}}}},
		{name: "nil credentials should not update", image: "test-image1"},
		{name: "empty credentials should not update", image: "test-image1", merge: &creds{KubernetesSecrets: []sec{}, KubernetesServiceAccounts: []sa{}}},
		{name: "multiple secrets with sorting verification", image: "new-sorted-image",
			merge: &creds{KubernetesSecrets: []sec{
				{UID: "uid-z", Namespace: "z-namespace", Name: "z-name", CredentialHash: "hash-z"},
				{UID: "uid-a", Namespace: "a-namespace", Name: "a-name", CredentialHash: "hash-a"},
				{UID: "uid-m", Namespace: "m-namespace", Name: "m-name", CredentialHash: "hash-m"},
			}},
			want: with("new-sorted-image", creds{KubernetesSecrets: []sec{
				{UID: "uid-z", Namespace: "z-namespace", Name: "z-name", CredentialHash: "hash-z"},
				{UID: "uid-a", Namespace: "a-namespace", Name: "a-name", CredentialHash: "hash-a"},
				{UID: "uid-m", Namespace: "m-namespace", Name: "m-name", CredentialHash: "hash-m"},
			}})},
		{name: "multiple service accounts with sorting verification", image: "new-sorted-sa-image",
			merge: &creds{KubernetesServiceAccounts: []sa{
				{UID: "sa-uid-z", Namespace: "z-namespace", Name: "z-sa"},
				{UID: "sa-uid-a", Namespace: "a-namespace", Name: "a-sa"},
				{UID: "sa-uid-m", Namespace: "m-namespace", Name: "m-sa"},
			}},
			want: with("new-sorted-sa-image", creds{KubernetesServiceAccounts: []sa{
				{UID: "sa-uid-z", Namespace: "z-namespace", Name: "z-sa"},
				{UID: "sa-uid-a", Namespace: "a-namespace", Name: "a-sa"},
				{UID: "sa-uid-m", Namespace: "m-namespace", Name: "m-sa"},
			}})},
		{name: "service account with same namespace and name but different UID", image: "test-image-with-sa",
			merge: &creds{KubernetesServiceAccounts: []sa{{UID: "different-uid", Namespace: "default", Name: "sa1"}}},
			want: with("test-image-with-sa", creds{KubernetesServiceAccounts: []sa{
				{UID: "different-uid", Namespace: "default", Name: "sa1"}, {UID: "sa-uid1", Namespace: "default", Name: "sa1"}}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := testRecord()
			got, updated := pulledRecordMergeNewCreds(orig, tt.image, tt.merge, testNow)
			want := tt.want
			if want == nil {
				want = testRecord()
			} else {
				want.LastUpdatedTime = metav1.NewTime(testNow)
			}
			if updated != (tt.want != nil) {
				t.Errorf("updated = %v, want %v", updated, tt.want != nil)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("pulledRecordMergeNewCreds() = %+v, want %+v", got, want)
			}
			if !reflect.DeepEqual(orig, testRecord()) {
				t.Errorf("the original record changed: %+v", orig)
			}
		})
	}
}

func TestMergePullServiceAccounts(t *testing.T) {
	tests := []struct {
		name        string
		orig, new   []sa
		want        []sa
		wantChanged bool
	}{
		{name: "merge empty slices", orig: []sa{}, new: []sa{}, want: []sa{}},
		{name: "add new service account to empty slice", orig: []sa{}, new: []sa{{UID: "sa1", Namespace: "default", Name: "serviceaccount1"}},
			want: []sa{{UID: "sa1", Namespace: "default", Name: "serviceaccount1"}}, wantChanged: true},
		{name: "duplicate service account - no change", orig: []sa{{UID: "sa1", Namespace: "default", Name: "serviceaccount1"}},
			new: []sa{{UID: "sa1", Namespace: "default", Name: "serviceaccount1"}}, want: []sa{{UID: "sa1", Namespace: "default", Name: "serviceaccount1"}}},
		{name: "merge different service accounts", orig: []sa{{UID: "sa1", Namespace: "default", Name: "serviceaccount1"}},
			new:  []sa{{UID: "sa2", Namespace: "kube-system", Name: "serviceaccount2"}},
			want: []sa{{UID: "sa1", Namespace: "default", Name: "serviceaccount1"}, {UID: "sa2", Namespace: "kube-system", Name: "serviceaccount2"}}, wantChanged: true},
		{name: "verify sorting by namespace, name, uid", orig: []sa{{UID: "sa2", Namespace: "kube-system", Name: "z-sa"}},
			new:  []sa{{UID: "sa1", Namespace: "default", Name: "a-sa"}, {UID: "sa3", Namespace: "kube-system", Name: "a-sa"}},
			want: []sa{{UID: "sa1", Namespace: "default", Name: "a-sa"}, {UID: "sa3", Namespace: "kube-system", Name: "a-sa"}, {UID: "sa2", Namespace: "kube-system", Name: "z-sa"}}, wantChanged: true},
		{name: "multiple service accounts with some duplicates",
			orig: []sa{{UID: "sa1", Namespace: "default", Name: "serviceaccount1"}, {UID: "sa2", Namespace: "kube-system", Name: "serviceaccount2"}},
			new:  []sa{{UID: "sa1", Namespace: "default", Name: "serviceaccount1"}, {UID: "sa3", Namespace: "default", Name: "serviceaccount3"}},
			want: []sa{{UID: "sa1", Namespace: "default", Name: "serviceaccount1"}, {UID: "sa3", Namespace: "default", Name: "serviceaccount3"},
				{UID: "sa2", Namespace: "kube-system", Name: "serviceaccount2"}}, wantChanged: true},
		{name: "same namespace and name, different UID", orig: []sa{{UID: "sa1", Namespace: "default", Name: "serviceaccount1"}},
			new:  []sa{{UID: "sa2", Namespace: "default", Name: "serviceaccount1"}},
			want: []sa{{UID: "sa1", Namespace: "default", Name: "serviceaccount1"}, {UID: "sa2", Namespace: "default", Name: "serviceaccount1"}}, wantChanged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := mergePullServiceAccounts(tt.orig, tt.new)
			if !reflect.DeepEqual(got, tt.want) || changed != tt.wantChanged {
				t.Errorf("mergePullServiceAccounts() = %v, %v; want %v, %v", got, changed, tt.want, tt.wantChanged)
			}
		})
	}
}

// countingRecords counts the pulled records written.
type countingRecords struct {
	*fsRecords
	pulledWrites int
}

func (c *countingRecords) WriteImagePulledRecord(ctx context.Context, r *pulled) error {
	c.pulledWrites++
	return c.fsRecords.WriteImagePulledRecord(ctx, r)
}

func TestMustAttemptImagePull(t *testing.T) {
	const (
		recordWithSecret = "sha256-b3c0cc4278800b03a308ceb2611161430df571ca733122f0a40ac8b9792a9064" // testimageref
		recordEmpty      = "sha256-f8778b6393eaf39315e767a58cbeacf2c4b270d94b4d6926ee993d9e49444991" // testemptycredmapping
		recordNodeWide   = "sha256-a2eace2182b24cdbbb730798e47b10709b9ef5e0f0c1624a3bc06c8ca987727a" // testimage-anonpull
		recordBrokenHash = "sha256-38a8906435c4dd5f4258899d46621bfd8eea3ad6ff494ee3c2f17ef0321625bd" // test-brokenhash
		recordSA         = "sha256-917e8b3439bf8a7a6f37ffd2d2ddfdfafac8a251bf214a0be39675742b420b1a" // testimageref-sa
		intentTest       = "sha256-aef2af226629a35d5f3ef0fdbb29fdbebf038d0acd8850590e8c48e1e283aa56" // docker.io/testing/test:latest
	)
	defaultSecret := func(ns, uid, hash string) []sec {
		return []sec{{UID: uid, Namespace: ns, Name: "pull-secret", CredentialHash: hash}}
	}
	testSA := &sa{UID: "test-sa-uid", Namespace: "default", Name: "test-sa"}
	tests := []struct {
		name                  string
		policy                requireVerification
		podSecrets            []sec
		podServiceAccount     *sa
		image, imageRef       string
		pulledFiles           []string
		pullingFiles          []string
		expectedPullRecord    *pulled
		want                  bool
		wantPodCredsRequested bool
	}{
		{name: "image exists and is recorded with pod's exact secret", podSecrets: defaultSecret("default", "testsecretuid", "testsecrethash"),
			imageRef: "testimageref", pulledFiles: []string{recordWithSecret}, want: false, wantPodCredsRequested: true},
		{name: "image exists and is recorded, no pod secrets",
			imageRef: "testimageref", pulledFiles: []string{recordWithSecret}, want: true, wantPodCredsRequested: true},
		{name: "image exists and is recorded with the same secret but different credential hash", podSecrets: defaultSecret("default", "testsecretuid", "differenthash"),
			imageRef: "testimageref", pulledFiles: []string{recordWithSecret}, want: false, wantPodCredsRequested: true,
			expectedPullRecord: &pulled{ImageRef: "testimageref", CredentialMapping: map[string]creds{
				"docker.io/testing/test": {KubernetesSecrets: defaultSecret("default", "testsecretuid", "differenthash")}}}},
		{name: "image exists and is recorded with a different secret with a different UID", podSecrets: defaultSecret("default", "different uid", "differenthash"),
			imageRef: "testimageref", pulledFiles: []string{recordWithSecret}, want: true, wantPodCredsRequested: true},
		{name: "image exists and is recorded with a different secret", podSecrets: defaultSecret("differentns", "testsecretuid", "differenthash"),
			imageRef: "testimageref", pulledFiles: []string{recordWithSecret}, want: true, wantPodCredsRequested: true},
		{name: "image exists and is recorded with a different secret with the same credential hash", podSecrets: defaultSecret("differentns", "testsecretuid", "testsecrethash"),
			imageRef: "testimageref", pulledFiles: []string{recordWithSecret}, want: false, wantPodCredsRequested: true,
			expectedPullRecord: &pulled{ImageRef: "testimageref", CredentialMapping: map[string]creds{
				"docker.io/testing/test": {KubernetesSecrets: append(defaultSecret("default", "testsecretuid", "testsecrethash"), defaultSecret("differentns", "testsecretuid", "testsecrethash")...)}}}},
		{name: "image exists but the pull is recorded with a different image name but with the exact same secret", podSecrets: defaultSecret("default", "testsecretuid", "testsecrethash"),
			image: "docker.io/testing/different:latest", imageRef: "testimageref", pulledFiles: []string{recordWithSecret}, want: true},
		{name: "image exists and is recorded with empty credential mapping", imageRef: "testemptycredmapping", pulledFiles: []string{recordEmpty}, want: true},
		{name: "image does not exist and there are no records of it", imageRef: "", want: true},
		{name: "image exists and there are no records of it with NeverVerifyPreloadedImages pull policy", imageRef: "testexistingref", want: false},
		{name: "image exists and there are no records of it with AlwaysVerify pull policy", policy: alwaysVerify, imageRef: "testexistingref", want: true},
		{name: "image exists but is only recorded via pulling intent", podSecrets: defaultSecret("default", "testsecretuid", "testsecrethash"),
			imageRef: "testexistingref", pullingFiles: []string{intentTest}, want: true},
		{name: "image exists but is only recorded via pulling intent - NeverVerify policy", policy: neverVerify, podSecrets: defaultSecret("default", "testsecretuid", "testsecrethash"),
			imageRef: "testexistingref", pullingFiles: []string{intentTest}, want: false},
		{name: "image exists and is recorded as node-accessible, no pod secrets", imageRef: "testimage-anonpull", pulledFiles: []string{recordNodeWide}, want: false},
		{name: "image exists and is recorded as node-accessible, request with pod secrets", podSecrets: defaultSecret("default", "testsecretuid", "testsecrethash"),
			imageRef: "testimage-anonpull", pulledFiles: []string{recordNodeWide}, want: false},
		{name: "image exists and is recorded with empty hash as its hashing originally failed, the same fail for a different pod secret", podSecrets: defaultSecret("differentns", "testsecretuid", ""),
			imageRef: "test-brokenhash", pulledFiles: []string{recordBrokenHash}, want: true, wantPodCredsRequested: true},
		{name: "image exists and is recorded with empty hash as its hashing originally failed, the same fail for the same pod secret", podSecrets: defaultSecret("default", "testsecretuid", ""),
			imageRef: "test-brokenhash", pulledFiles: []string{recordBrokenHash}, want: false, wantPodCredsRequested: true},
		{name: "image exists and is recorded with pod's exact service account", podServiceAccount: testSA,
			imageRef: "testimageref-sa", pulledFiles: []string{recordSA}, want: false, wantPodCredsRequested: true},
		{name: "image exists and is recorded, no pod service accounts", imageRef: "testimageref", pulledFiles: []string{recordWithSecret}, want: true, wantPodCredsRequested: true},
		{name: "image exists and is recorded with a different service account with different UID", podServiceAccount: &sa{UID: "different-sa-uid", Namespace: "default", Name: "test-sa"},
			imageRef: "testimageref-sa", pulledFiles: []string{recordSA}, want: true, wantPodCredsRequested: true},
		{name: "image exists and is recorded with a different service account with different namespace", podServiceAccount: &sa{UID: "test-sa-uid", Namespace: "different-ns", Name: "test-sa"},
			imageRef: "testimageref-sa", pulledFiles: []string{recordSA}, want: true, wantPodCredsRequested: true},
		{name: "image exists but the pull is recorded with a different image name but with the exact same service account", podServiceAccount: testSA,
			image: "docker.io/testing/different:latest", imageRef: "testimageref-sa", pulledFiles: []string{recordSA}, want: true},
		{name: "image exists but is only recorded via pulling intent with service account", podServiceAccount: testSA,
			imageRef: "testexistingref", pullingFiles: []string{intentTest}, want: true},
		{name: "image exists but is only recorded via pulling intent with service account - NeverVerify policy", policy: neverVerify, podServiceAccount: testSA,
			imageRef: "testexistingref", pullingFiles: []string{intentTest}, want: false},
		{name: "image exists and is recorded as node-accessible, request with pod service accounts", podServiceAccount: testSA,
			imageRef: "testimage-anonpull", pulledFiles: []string{recordNodeWide}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			records := &countingRecords{fsRecords: testFSRecords(t, tt.pullingFiles, tt.pulledFiles)}
			policy, image := tt.policy, tt.image
			if policy == nil {
				policy = neverVerifyPreloaded
			}
			if image == "" {
				image = "docker.io/testing/test:latest"
			}
			var podCredsRequested bool
			getCreds := func() ([]sec, *sa, error) {
				podCredsRequested = true
				return tt.podSecrets, tt.podServiceAccount, nil
			}
			m := testManager(records, policy, nil)
			if got, err := m.MustAttemptImagePull(ctx, image, tt.imageRef, getCreds); err != nil || got != tt.want {
				t.Errorf("MustAttemptImagePull() = %v, %v; want %v", got, err, tt.want)
			}
			if podCredsRequested != tt.wantPodCredsRequested {
				t.Errorf("pod credentials requested: %v, want %v", podCredsRequested, tt.wantPodCredsRequested)
			}
			if wantWrite := tt.expectedPullRecord != nil; wantWrite != (records.pulledWrites != 0) {
				t.Errorf("%d pulled record writes, want a write: %v", records.pulledWrites, wantWrite)
			}
			if tt.expectedPullRecord != nil {
				got, found, err := records.GetImagePulledRecord(tt.imageRef)
				if err != nil || !found {
					t.Fatalf("GetImagePulledRecord(): %v, found %v", err, found)
				}
				if !got.LastUpdatedTime.Equal(&metav1.Time{Time: testNow}) {
					t.Errorf("record updated at %v, want %v", got.LastUpdatedTime, testNow)
				}
				got.LastUpdatedTime = tt.expectedPullRecord.LastUpdatedTime
				if !reflect.DeepEqual(got, tt.expectedPullRecord) {
					t.Errorf("record %+v, want %+v", got, tt.expectedPullRecord)
				}
			}
		})
	}
}

func TestMatchPodSecrets(t *testing.T) {
	cached := []sec{{UID: "u", Namespace: "ns", Name: "n", CredentialHash: "h"}}
	many := make([]sec, writeRecordWhileMatchingLimit)
	for i := range many {
		many[i] = sec{UID: fmt.Sprintf("uid-%d", i), Namespace: "ns", Name: "n", CredentialHash: fmt.Sprintf("hash-%d", i)}
	}
	many[0] = cached[0]
	tests := []struct {
		name         string
		cached, pod  []sec
		wantMatch    bool
		wantRemember bool
	}{
		{name: "exact", cached: cached, pod: cached, wantMatch: true},
		{name: "same hash, other coordinates", cached: cached, pod: []sec{{UID: "x", Namespace: "ns", Name: "n", CredentialHash: "h"}}, wantMatch: true, wantRemember: true},
		{name: "same coordinates, new hash", cached: cached, pod: []sec{{UID: "u", Namespace: "ns", Name: "n", CredentialHash: "h2"}}, wantMatch: true, wantRemember: true},
		{name: "nothing in common", cached: cached, pod: []sec{{UID: "x", Namespace: "ns", Name: "n", CredentialHash: "h2"}}},
		{name: "same hash, other coordinates, full record", cached: many, pod: []sec{{UID: "x", Namespace: "ns", Name: "n", CredentialHash: "h"}}, wantMatch: true},
		{name: "same coordinates, new hash, full record", cached: many, pod: []sec{{UID: "u", Namespace: "ns", Name: "n", CredentialHash: "h2"}}},
		{name: "empty hashes do not match", cached: []sec{{UID: "u", Namespace: "ns", Name: "n"}}, pod: []sec{{UID: "x", Namespace: "ns", Name: "n"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			match, remember := matchPodSecrets(tt.cached, tt.pod)
			if match != tt.wantMatch || (remember != nil) != tt.wantRemember {
				t.Errorf("matchPodSecrets() = %v, %v; want %v, remember %v", match, remember, tt.wantMatch, tt.wantRemember)
			}
			if remember != nil && *remember != tt.pod[0] {
				t.Errorf("remember %+v, want the pod's secret %+v", *remember, tt.pod[0])
			}
		})
	}
}

func TestRecordPullIntent(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	const image = "repo.repo/test/test:latest"
	for start, want := range map[int32]int32{0: 1, 1: 2} {
		records := testFSRecords(t, nil, nil)
		m := testManager(records, neverVerifyPreloaded, nil)
		if start > 0 {
			m.intentCounters.Store(image, start)
		}
		if err := m.RecordPullIntent(ctx, image); err != nil {
			t.Fatal(err)
		}
		if got := m.intentCounter(image); got != want {
			t.Errorf("counter from %d: %d, want %d", start, got, want)
		}
		data, err := os.ReadFile(filepath.Join(records.pullingDir, "sha256-7d8c031e2f1aeaa71649ca3e0b64c9902370ed460ef57fb07582a87a5a1e1c02"))
		if err != nil {
			t.Fatal(err)
		}
		if got, _, err := decodeIntent(data); err != nil || got.Image != image {
			t.Errorf("intent %+v, %v", got, err)
		}
	}
}

func TestRecordImagePulled(t *testing.T) {
	const (
		recordWithSecret = "sha256-b3c0cc4278800b03a308ceb2611161430df571ca733122f0a40ac8b9792a9064" // testimageref
		recordSA         = "sha256-917e8b3439bf8a7a6f37ffd2d2ddfdfafac8a251bf214a0be39675742b420b1a" // testimageref-sa
		intentV1         = "sha256-ee81caca15454863449fb55a1d942904d56d5ed9f9b20a7cb3453944ea2c7e11" // repo.repo/test/test:v1
		intentSomething  = "sha256-f24acc752be18b93b0504c86312bbaf482c9efb0c45e925bbccb0a591cebd7af" // docker.io/testing/test:something
	)
	testSecret := sec{UID: "testsecretuid", Namespace: "default", Name: "pull-secret", CredentialHash: "testsecrethash"}
	testSA := sa{UID: "test-sa-uid", Namespace: "default", Name: "test-sa"}
	tests := []struct {
		name                 string
		image, imageRef      string
		creds                *creds
		pullsInFlight        int32
		existingPulling      []string
		existingPulled       []string
		expectPullingRemoved string
		expectPulled         []string
		expectedPullRecord   pulled
		expectUpdated        bool
	}{
		{name: "new pull record", image: "repo.repo/test/test:v1", imageRef: "testimageref", creds: &creds{NodePodsAccessible: true},
			existingPulling: []string{intentV1}, pullsInFlight: 1, expectPullingRemoved: intentV1, expectPulled: []string{recordWithSecret}, expectUpdated: true,
			expectedPullRecord: pulled{ImageRef: "testimageref", CredentialMapping: map[string]creds{"repo.repo/test/test": {NodePodsAccessible: true}}}},
		{name: "new pull record, more pulls in-flight", image: "repo.repo/test/test:v1", imageRef: "testimageref", creds: &creds{NodePodsAccessible: true},
			existingPulling: []string{intentV1}, pullsInFlight: 2, expectPulled: []string{recordWithSecret}, expectUpdated: true,
			expectedPullRecord: pulled{ImageRef: "testimageref", CredentialMapping: map[string]creds{"repo.repo/test/test": {NodePodsAccessible: true}}}},
		{name: "merge into existing record", image: "repo.repo/test/test:v1", imageRef: "testimageref", creds: &creds{NodePodsAccessible: true},
			existingPulled:  []string{recordWithSecret, "sha256-a2eace2182b24cdbbb730798e47b10709b9ef5e0f0c1624a3bc06c8ca987727a", "sha256-f8778b6393eaf39315e767a58cbeacf2c4b270d94b4d6926ee993d9e49444991"},
			expectPulled:    []string{recordWithSecret, "sha256-a2eace2182b24cdbbb730798e47b10709b9ef5e0f0c1624a3bc06c8ca987727a", "sha256-f8778b6393eaf39315e767a58cbeacf2c4b270d94b4d6926ee993d9e49444991"},
			existingPulling: []string{intentV1}, pullsInFlight: 1, expectPullingRemoved: intentV1, expectUpdated: true,
			expectedPullRecord: pulled{ImageRef: "testimageref", CredentialMapping: map[string]creds{
				"repo.repo/test/test":    {NodePodsAccessible: true},
				"docker.io/testing/test": {KubernetesSecrets: []sec{testSecret}},
			}}},
		{name: "merge into existing record - existing key in creds mapping", image: "docker.io/testing/test:something", imageRef: "testimageref",
			creds:          &creds{KubernetesSecrets: []sec{{UID: "newuid", Namespace: "newns", Name: "newname", CredentialHash: "somehash"}}},
			existingPulled: []string{recordWithSecret}, expectPulled: []string{recordWithSecret},
			existingPulling: []string{intentSomething}, pullsInFlight: 1, expectPullingRemoved: intentSomething, expectUpdated: true,
			expectedPullRecord: pulled{ImageRef: "testimageref", CredentialMapping: map[string]creds{
				"docker.io/testing/test": {KubernetesSecrets: []sec{testSecret, {UID: "newuid", Namespace: "newns", Name: "newname", CredentialHash: "somehash"}}},
			}}},
		{name: "existing record stays unchanged", image: "docker.io/testing/test:something", imageRef: "testimageref", creds: &creds{KubernetesSecrets: []sec{testSecret}},
			existingPulled: []string{recordWithSecret}, expectPulled: []string{recordWithSecret},
			existingPulling: []string{intentSomething}, pullsInFlight: 1, expectPullingRemoved: intentSomething,
			expectedPullRecord: pulled{ImageRef: "testimageref", CredentialMapping: map[string]creds{"docker.io/testing/test": {KubernetesSecrets: []sec{testSecret}}}}},
		{name: "new pull record with service account credentials", image: "docker.io/sa-test/app:v1", imageRef: "sa-testimageref",
			creds:        &creds{KubernetesServiceAccounts: []sa{{UID: "sa-uid-123", Namespace: "default", Name: "test-sa"}}},
			expectPulled: []string{"sha256-7ff6218f8ead494f56af9cb95c4b855fb62609d01342fe961553ac2ed520fcfb"}, pullsInFlight: 1,
			expectPullingRemoved: "sha256-0b79dd5fccc09268cfa5ca054c82bce049461690e016778175fd92f79e7314dd", expectUpdated: true,
			expectedPullRecord: pulled{ImageRef: "sa-testimageref", CredentialMapping: map[string]creds{
				"docker.io/sa-test/app": {KubernetesServiceAccounts: []sa{{UID: "sa-uid-123", Namespace: "default", Name: "test-sa"}}}}}},
		{name: "merge service account into existing record with secrets", image: "docker.io/testing/test:something", imageRef: "testimageref",
			creds:          &creds{KubernetesServiceAccounts: []sa{{UID: "sa-uid-456", Namespace: "kube-system", Name: "system-sa"}}},
			existingPulled: []string{recordWithSecret}, expectPulled: []string{recordWithSecret},
			existingPulling: []string{intentSomething}, pullsInFlight: 1, expectPullingRemoved: intentSomething, expectUpdated: true,
			expectedPullRecord: pulled{ImageRef: "testimageref", CredentialMapping: map[string]creds{"docker.io/testing/test": {
				KubernetesSecrets:         []sec{testSecret},
				KubernetesServiceAccounts: []sa{{UID: "sa-uid-456", Namespace: "kube-system", Name: "system-sa"}},
			}}}},
		{name: "merge additional service account into existing record with service accounts", image: "docker.io/testing/test:something", imageRef: "testimageref-sa",
			creds:          &creds{KubernetesServiceAccounts: []sa{{UID: "sa-uid-789", Namespace: "app-ns", Name: "app-sa"}}},
			existingPulled: []string{recordSA}, expectPulled: []string{recordSA},
			existingPulling: []string{intentSomething}, pullsInFlight: 1, expectPullingRemoved: intentSomething, expectUpdated: true,
			expectedPullRecord: pulled{ImageRef: "testimageref-sa", CredentialMapping: map[string]creds{"docker.io/testing/test": {
				KubernetesServiceAccounts: []sa{{UID: "sa-uid-789", Namespace: "app-ns", Name: "app-sa"}, testSA}}}}},
		{name: "duplicate service account should not create duplicates", image: "docker.io/testing/test:something", imageRef: "testimageref-sa",
			creds:          &creds{KubernetesServiceAccounts: []sa{testSA}},
			existingPulled: []string{recordSA}, expectPulled: []string{recordSA},
			existingPulling: []string{intentSomething}, pullsInFlight: 1, expectPullingRemoved: intentSomething,
			expectedPullRecord: pulled{ImageRef: "testimageref-sa", CredentialMapping: map[string]creds{"docker.io/testing/test": {KubernetesServiceAccounts: []sa{testSA}}}}},
		{name: "record with familiar image name - only the last segment", image: "testing@sha256:f24acc752be18b93b0504c86312bbaf482c9efb0c45e925bbccb0a591cebd7af",
			imageRef: "testimageref-familiarlast", creds: &creds{KubernetesServiceAccounts: []sa{testSA}},
			existingPulling: []string{"sha256-7ffc99ef20589dc844b202c4cba501d1aaf06d1481935aa1e160029afd639847"},
			expectPulled:    []string{"sha256-f2ba1256df29972c4fe11d8af7d302e37631c6077a2ed29d8bee55ee77cf26ad"}, pullsInFlight: 1,
			expectPullingRemoved: "sha256-7ffc99ef20589dc844b202c4cba501d1aaf06d1481935aa1e160029afd639847", expectUpdated: true,
			expectedPullRecord: pulled{ImageRef: "testimageref-familiarlast", CredentialMapping: map[string]creds{"testing": {KubernetesServiceAccounts: []sa{testSA}}}}},
		{name: "record with familiar image name - org and name", image: "secretorg/myimage:customtag",
			imageRef: "testimageref-familiarwithorg", creds: &creds{KubernetesServiceAccounts: []sa{testSA}},
			existingPulling: []string{"sha256-5f3ca9e4d82e32203c2fafb410dfae9c8047bc6ebe57d642fe264d479e152955"},
			expectPulled:    []string{"sha256-ff66306c3a398c6e6b64d8f7acdd1aebc37fce76add3849f9d3f59274434234a"}, pullsInFlight: 1,
			expectPullingRemoved: "sha256-5f3ca9e4d82e32203c2fafb410dfae9c8047bc6ebe57d642fe264d479e152955", expectUpdated: true,
			expectedPullRecord: pulled{ImageRef: "testimageref-familiarwithorg", CredentialMapping: map[string]creds{"secretorg/myimage": {KubernetesServiceAccounts: []sa{testSA}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			records := testFSRecords(t, tt.existingPulling, tt.existingPulled)
			m := testManager(records, neverVerifyPreloaded, nil)
			m.intentCounters.Store(tt.image, tt.pullsInFlight)
			m.RecordImagePulled(ctx, tt.image, tt.imageRef, tt.creds)
			if got := m.intentCounter(tt.image); got != tt.pullsInFlight-1 {
				t.Errorf("intent counter %d, want %d", got, tt.pullsInFlight-1)
			}
			for _, f := range tt.expectPulled {
				if _, err := os.Stat(filepath.Join(records.pulledDir, f)); err != nil {
					t.Error(err)
				}
			}
			if tt.expectPullingRemoved != "" {
				if _, err := os.Stat(filepath.Join(records.pullingDir, tt.expectPullingRemoved)); !os.IsNotExist(err) {
					t.Errorf("intent %s: %v, want it removed", tt.expectPullingRemoved, err)
				}
			}
			data, err := os.ReadFile(filepath.Join(records.pulledDir, cacheFilename(tt.imageRef)))
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := decodePulledRecord(data)
			if err != nil {
				t.Fatal(err)
			}
			if updated := got.LastUpdatedTime.Equal(&metav1.Time{Time: testNow}); updated != tt.expectUpdated {
				t.Errorf("record updated at %v, want an update: %v", got.LastUpdatedTime, tt.expectUpdated)
			}
			got.LastUpdatedTime = tt.expectedPullRecord.LastUpdatedTime
			if !reflect.DeepEqual(got, &tt.expectedPullRecord) {
				t.Errorf("record %+v, want %+v", got, tt.expectedPullRecord)
			}
		})
	}
}

func TestRecordImagePullFailed(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	const image = "repo.repo/test/test:v1"
	records := testFSRecords(t, nil, nil)
	m := testManager(records, neverVerifyPreloaded, nil)
	for range 2 {
		if err := m.RecordPullIntent(ctx, image); err != nil {
			t.Fatal(err)
		}
	}
	m.RecordImagePullFailed(ctx, image)
	if exists, err := records.ImagePullIntentExists(image); err != nil || !exists {
		t.Errorf("intent exists %v, %v after the first of two pulls failed", exists, err)
	}
	m.RecordImagePullFailed(ctx, image)
	if exists, err := records.ImagePullIntentExists(image); err != nil || exists || m.intentCounter(image) != 0 {
		t.Errorf("intent exists %v, %v, counter %d after both pulls failed", exists, err, m.intentCounter(image))
	}
}

func TestInitialize(t *testing.T) {
	images := fakeImages{
		{Id: "testimageref1", RepoTags: []string{"repo.repo/test/test:docker", "docker.io/testing/test:something"}},
		{Id: "testimageref2", RepoTags: []string{"repo.repo/test/test:v2", "repo.repo/test/test:test2"}, RepoDigests: []string{"repo.repo/test/test@dgst2"}},
		{Id: "testimageref", RepoTags: []string{"repo.repo/test/test:v1", "repo.repo/test/test:test1"}, RepoDigests: []string{"repo.repo/test/test@dgst1"}},
		{Id: "testimageref3", RepoTags: []string{"repo.repo/test/test:v3", "repo.repo/test/test:test3"}},
		{Id: "testimageref4", RepoDigests: []string{"repo.repo/test/test@dgst4", "repo.repo/test/notatest@dgst44"}},
	}
	existingPulled := []string{
		"sha256-a2eace2182b24cdbbb730798e47b10709b9ef5e0f0c1624a3bc06c8ca987727a",
		"sha256-b3c0cc4278800b03a308ceb2611161430df571ca733122f0a40ac8b9792a9064",
		"sha256-f8778b6393eaf39315e767a58cbeacf2c4b270d94b4d6926ee993d9e49444991",
	}
	testimageref1 := "sha256-d77ed7480bc819274ea7a4dba5b2699b2d3f73c6e578762df42e5a8224771096"
	tests := []struct {
		name                  string
		existingIntents       []string
		existingPulledRecords []string
		expectedPulled        sets.Set[string]
	}{
		{name: "no pulling/pulled records", expectedPulled: sets.New[string]()},
		{name: "only pulled records", existingPulledRecords: existingPulled, expectedPulled: sets.New(existingPulled...)},
		{name: "pulling intent that matches an existing image - no matching pulled record", existingPulledRecords: existingPulled,
			existingIntents: []string{"sha256-f24acc752be18b93b0504c86312bbaf482c9efb0c45e925bbccb0a591cebd7af"},
			expectedPulled:  sets.New(append(existingPulled, testimageref1)...)},
		{name: "pulling intent that matches an existing image - a pull record matches", existingPulledRecords: existingPulled,
			existingIntents: []string{"sha256-ee81caca15454863449fb55a1d942904d56d5ed9f9b20a7cb3453944ea2c7e11"},
			expectedPulled:  sets.New(existingPulled...)},
		{name: "multiple pulling intents that match existing images", existingPulledRecords: existingPulled,
			existingIntents: []string{"sha256-ee81caca15454863449fb55a1d942904d56d5ed9f9b20a7cb3453944ea2c7e11", "sha256-f24acc752be18b93b0504c86312bbaf482c9efb0c45e925bbccb0a591cebd7af"},
			expectedPulled:  sets.New(append(existingPulled, testimageref1)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			records := testFSRecords(t, tt.existingIntents, tt.existingPulledRecords)
			testManager(records, neverVerifyPreloaded, images).initialize(ctx)
			if got := dirFiles(t, records.pullingDir); got.Len() != 0 {
				t.Errorf("intents left: %v", sets.List(got))
			}
			if got := dirFiles(t, records.pulledDir); !got.Equal(tt.expectedPulled) {
				t.Errorf("pulled records %v, want %v", sets.List(got), sets.List(tt.expectedPulled))
			}
		})
	}
}

func TestPruneUnknownRecords(t *testing.T) {
	pulledFiles := []string{
		"sha256-a2eace2182b24cdbbb730798e47b10709b9ef5e0f0c1624a3bc06c8ca987727a", // testimage-anonpull
		"sha256-b3c0cc4278800b03a308ceb2611161430df571ca733122f0a40ac8b9792a9064", // testimageref
		"sha256-f8778b6393eaf39315e767a58cbeacf2c4b270d94b4d6926ee993d9e49444991", // testemptycredmapping
	}
	gcStart := time.Date(2024, 12, 25, 0, 1, 0, 0, time.UTC)
	tests := []struct {
		name        string
		imageList   []string
		gcStartTime time.Time
		wantFiles   sets.Set[string]
	}{
		{name: "all images present", imageList: []string{"testimage-anonpull", "testimageref", "testemptycredmapping"}, gcStartTime: gcStart,
			wantFiles: sets.New(pulledFiles...)},
		{name: "remove all records on empty list from the GC", imageList: []string{}, gcStartTime: gcStart, wantFiles: sets.New[string]()},
		{name: "remove all records on list of untracked images from the GC", imageList: []string{"untracked1", "different-untracked"}, gcStartTime: gcStart,
			wantFiles: sets.New[string]()},
		{name: "remove records without a match in the image list from the GC", imageList: []string{"testimage-anonpull", "untracked1", "testimageref", "different-untracked"},
			gcStartTime: gcStart, wantFiles: sets.New(pulledFiles[:2]...)},
		{name: "keep records updated since the GC started", imageList: []string{}, gcStartTime: time.Date(2024, 10, 21, 12, 26, 40, 0, time.UTC),
			wantFiles: sets.New(pulledFiles...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			records := testFSRecords(t, nil, pulledFiles)
			testManager(records, neverVerifyPreloaded, nil).PruneUnknownRecords(ctx, tt.imageList, tt.gcStartTime)
			if got := dirFiles(t, records.pulledDir); !got.Equal(tt.wantFiles) {
				t.Errorf("files left %v, want %v", sets.List(got), sets.List(tt.wantFiles))
			}
		})
	}
}

func TestCredentialHash(t *testing.T) {
	hash := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	tests := []struct{ username, password, email, json string }{
		{"user", "pass", "", `{"username":"user","password":"pass"}`},
		{"user", "pass", "me@example.com", `{"username":"user","password":"pass","email":"me@example.com"}`},
		{"", "", "", `{}`},
		{"u\"<", "p", "", `{"username":"u\"\u003c","password":"p"}`},
	}
	for _, tt := range tests {
		if got, want := CredentialHash(tt.username, tt.password, tt.email), hash(tt.json); got != want {
			t.Errorf("CredentialHash(%q, %q, %q) = %s, want sha256(%s) = %s", tt.username, tt.password, tt.email, got, tt.json, want)
		}
	}
	// upstream's hash of a secret with username "user", password "pass"
	if got, want := CredentialHash("user", "pass", ""), "cb54b00fb550d4a17c448149caa29f38f4d5a44fb87c752e43db8160af3a032a"; got != want {
		t.Errorf("CredentialHash() = %s, want %s", got, want)
	}
}
