package pullmanager

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2/ktesting"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"
)

// checkGauge compares the gauge kubelet_<name> in reg with want, HELP
// line included.
func checkGauge(t *testing.T, reg prometheus.Gatherer, name, help string, want int) {
	t.Helper()
	expected := fmt.Sprintf("# HELP kubelet_%s %s\n# TYPE kubelet_%s gauge\nkubelet_%s %d\n", name, help, name, name, want)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "kubelet_"+name); err != nil {
		t.Error(err)
	}
}

func TestRecordsMetrics(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	reg := prometheus.NewPedanticRegistry()
	m := newMetrics(reg)
	fs, err := newFSRecords(ctx, t.TempDir(), m)
	if err != nil {
		t.Fatal(err)
	}
	records := newCachedRecords(ctx, fs, 5, 10, 1, m)

	check := func(fsIntents, memIntents, fsPulled, memPulled int) {
		t.Helper()
		checkGauge(t, reg, "imagemanager_ondisk_pullintents", "[ALPHA] Number of ImagePullIntents stored on disk.", fsIntents)
		checkGauge(t, reg, "imagemanager_inmemory_pullintents_usage_percent", "[ALPHA] The ImagePullIntents in-memory cache usage in percent.", memIntents)
		checkGauge(t, reg, "imagemanager_ondisk_pulledrecords", "[ALPHA] Number of ImagePulledRecords stored on disk.", fsPulled)
		checkGauge(t, reg, "imagemanager_inmemory_pulledrecords_usage_percent", "[ALPHA] The ImagePulledRecords in-memory cache usage in percent.", memPulled)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	writeRecord := func(ref string) error {
		return records.WriteImagePulledRecord(ctx, &kubeletconfigv1beta1.ImagePulledRecord{ImageRef: ref, LastUpdatedTime: metav1.NewTime(testNow)})
	}

	check(0, 0, 0, 0)
	must(records.WriteImagePullIntent(ctx, "test-image:latest"))
	check(1, 20, 0, 0)
	// the same record again does not count
	must(records.WriteImagePullIntent(ctx, "test-image:latest"))
	must(records.WriteImagePullIntent(ctx, "test-image:latest"))
	check(1, 20, 0, 0)
	must(records.WriteImagePullIntent(ctx, "test-image:v1"))
	must(records.WriteImagePullIntent(ctx, "test-image:v1.1"))
	check(3, 60, 0, 0)

	must(writeRecord("test-image-latest-ref"))
	check(3, 60, 1, 10)
	must(writeRecord("test-image-latest-ref"))
	must(writeRecord("test-image-latest-ref"))
	check(3, 60, 1, 10)
	for _, ref := range []string{"test-image-v1-ref", "test-image-v1.1-ref", "test-image-v1.2-ref"} {
		must(writeRecord(ref))
	}
	check(3, 60, 4, 40)

	must(records.DeleteImagePullIntent(ctx, "test-image:latest"))
	check(2, 40, 4, 40)
	must(records.DeleteImagePullIntent(ctx, "test-image:latest"))
	must(records.DeleteImagePullIntent(ctx, "test-image:latest"))
	check(2, 40, 4, 40)
	must(records.DeleteImagePullIntent(ctx, "test-image:v1"))
	must(records.DeleteImagePullIntent(ctx, "test-image:v1.1"))
	check(0, 0, 4, 40)

	must(records.DeleteImagePulledRecord(ctx, "test-image-v1.1-ref"))
	check(0, 0, 3, 30)
	must(records.DeleteImagePulledRecord(ctx, "test-image-v1.1-ref"))
	check(0, 0, 3, 30)
	for _, ref := range []string{"test-image-v1.2-ref", "test-image-v1-ref", "test-image-latest-ref", "test-image-v1-ref"} {
		must(records.DeleteImagePulledRecord(ctx, ref))
	}
	check(0, 0, 0, 0)

	// beyond the caches' sizes
	for i := range 20 {
		must(records.WriteImagePullIntent(ctx, fmt.Sprintf("test-image-%d:latest", i)))
		must(writeRecord(fmt.Sprintf("test-image-v%d-ref", i)))
	}
	check(20, 100, 20, 100)
	must(records.DeleteImagePullIntent(ctx, "test-image-19:latest"))
	must(records.DeleteImagePulledRecord(ctx, "test-image-v19-ref"))
	check(19, 80, 19, 90)
}

func TestMustAttemptPullMetrics(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	reg := prometheus.NewPedanticRegistry()
	m := newMetrics(reg)
	fs, err := newFSRecords(ctx, dir, m)
	if err != nil {
		t.Fatal(err)
	}
	mgr := newManager(fs, (&allowlistPolicy{absoluteURLs: sets.New("docker.io/testing/policyexempt")}).requireVerification,
		fakeImages{}, 1, clocktesting.NewFakeClock(testNow), m)
	teeTestData(t, filepath.Join(dir, "image_manager", "pulled"), "pulled", []string{
		"sha256-e766e4624f9bc4d3847d6c5b470d9d5362cc8d0c250bd9572daf95278e044263", // testbrokenrecord
		"sha256-a2eace2182b24cdbbb730798e47b10709b9ef5e0f0c1624a3bc06c8ca987727a", // testimage-anonpull
		"sha256-f4058727984875eb66ddbf289f7013096d4cbaa167e591fbcb2e447e36391c1f", // policyallowed
		"sha256-b3c0cc4278800b03a308ceb2611161430df571ca733122f0a40ac8b9792a9064", // testimageref
	})

	counts := map[mustAttemptImagePullResult]int{}
	attempt := func(want bool, image, imageRef string, getCreds GetPodCredentials, result mustAttemptImagePullResult) {
		t.Helper()
		// only getCreds' error is returned
		if got, err := mgr.MustAttemptImagePull(ctx, image, imageRef, getCreds); (err != nil) != (getCreds != nil && result == checkResultError) || got != want {
			t.Fatalf("MustAttemptImagePull(%q, %q) = %v, %v; want %v", image, imageRef, got, err, want)
		}
		counts[result]++
		expected := "# HELP kubelet_imagemanager_image_mustpull_checks_total [ALPHA] Counter for how many times kubelet checked whether credentials need to be re-verified to access an image\n" +
			"# TYPE kubelet_imagemanager_image_mustpull_checks_total counter\n"
		for r, n := range counts {
			expected += fmt.Sprintf("kubelet_imagemanager_image_mustpull_checks_total{result=%q} %d\n", r, n)
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "kubelet_imagemanager_image_mustpull_checks_total"); err != nil {
			t.Error(err)
		}
	}
	for range 3 {
		attempt(true, "docker.io/testing/broken", "testbrokenrecord", nil, checkResultError)
	}
	for range 4 {
		attempt(false, "docker.io/testing/test", "testimage-anonpull", nil, checkResultCredentialRecordFound)
	}
	for range 2 {
		attempt(false, "docker.io/testing/policyexempt", "policyallowed", nil, checkResultCredentialPolicyAllowed)
	}
	attempt(true, "docker.io/testing/norecords", "somewhatunknown", nil, checkResultMustAuthenticate)
	attempt(false, "docker.io/testing/test", "testimageref", func() ([]kubeletconfigv1beta1.ImagePullSecret, *kubeletconfigv1beta1.ImagePullServiceAccount, error) {
		return []kubeletconfigv1beta1.ImagePullSecret{{UID: "testsecretuid", Namespace: "default", Name: "pull-secret", CredentialHash: "testsecrethash"}}, nil, nil
	}, checkResultCredentialRecordFound)
	attempt(true, "docker.io/testing/test", "testimageref", func() ([]kubeletconfigv1beta1.ImagePullSecret, *kubeletconfigv1beta1.ImagePullServiceAccount, error) {
		return nil, nil, context.Canceled
	}, checkResultError)
}
