package pullmanager

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// teeTestData copies testdata/<testdataDir>/<f> for each f of src into
// dstDir and returns their contents by name.
func teeTestData(t *testing.T, dstDir string, testdataDir string, src []string) map[string]string {
	t.Helper()
	ret := make(map[string]string, len(src))
	for _, f := range src {
		data, err := os.ReadFile(filepath.Join("testdata", testdataDir, f))
		if err != nil {
			t.Fatalf("failed to read test data: %v", err)
		}
		if err := writeFile(dstDir, f, data); err != nil {
			t.Fatalf("failed to write test data: %v", err)
		}
		ret[f] = string(data)
	}
	return ret
}

func TestNewFSRecords(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	toBeta := func(s string) string {
		return strings.Replace(s, "kubelet.config.k8s.io/v1alpha1", "kubelet.config.k8s.io/v1beta1", 1)
	}
	alphaIntents := []string{
		"sha256-6da3dced7eccc7ad0189517c31ec2235b50f730449d738d91525721f7e027fd4",
		"sha256-b6e1482bb6cb030924530b918e609fff30bbb07ab6845451d89deb823c3f72a9",
	}
	betaIntents := []string{
		"sha256-aef2af226629a35d5f3ef0fdbb29fdbebf038d0acd8850590e8c48e1e283aa56",
		"sha256-ee81caca15454863449fb55a1d942904d56d5ed9f9b20a7cb3453944ea2c7e11",
		"sha256-f24acc752be18b93b0504c86312bbaf482c9efb0c45e925bbccb0a591cebd7af",
	}
	alphaPulled := []string{
		"sha256-7045bdd498b0e4b3963d50f906793ffbd68dc98686ec46c5b499a0a640a560b2",
		"sha256-dd1dd8dc6a329b7e1c2e43951302b23a047cb20fd3e10090e4ce7e8396035405",
	}
	betaPulled := []string{
		"sha256-38a8906435c4dd5f4258899d46621bfd8eea3ad6ff494ee3c2f17ef0321625bd",
		"sha256-a2eace2182b24cdbbb730798e47b10709b9ef5e0f0c1624a3bc06c8ca987727a",
		"sha256-f8778b6393eaf39315e767a58cbeacf2c4b270d94b4d6926ee993d9e49444991",
	}
	tests := []struct {
		name                    string
		initRoot                bool
		initIntents, initPulled []string
	}{
		{name: "kubelet root dir does not exist"},
		{name: "kubelet root dir exists", initRoot: true},
		{name: "only alpha intents", initRoot: true, initIntents: alphaIntents},
		{name: "alpha and beta intents mixed", initRoot: true, initIntents: append(alphaIntents, betaIntents[:2]...)},
		{name: "only beta intents", initRoot: true, initIntents: betaIntents},
		{name: "only alpha pulled records", initRoot: true, initPulled: alphaPulled},
		{name: "alpha and beta pulled records mixed", initRoot: true, initPulled: append(alphaPulled, betaPulled...)},
		{name: "only beta pulled records", initRoot: true, initPulled: betaPulled},
		{name: "everything altogether", initRoot: true, initIntents: append(alphaIntents, betaIntents[:2]...), initPulled: append(alphaPulled, betaPulled...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rootDir := t.TempDir()
			if !tt.initRoot {
				rootDir = filepath.Join(rootDir, "does-not-exist", "level2dir")
			}
			intentsDir := filepath.Join(rootDir, "image_manager", "pulling")
			pulledDir := filepath.Join(rootDir, "image_manager", "pulled")
			// the migrated records are upstream's v1beta1 encoding of them
			wantIntents := teeTestData(t, intentsDir, "pulling", tt.initIntents)
			for f := range wantIntents {
				wantIntents[f] = toBeta(wantIntents[f])
			}
			wantPulled := teeTestData(t, pulledDir, "pulled", tt.initPulled)
			for f := range wantPulled {
				wantPulled[f] = toBeta(wantPulled[f])
			}

			if _, err := newFSRecords(ctx, rootDir, newMetrics(nil)); err != nil {
				t.Fatal(err)
			}
			for _, dir := range []string{intentsDir, pulledDir} {
				if info, err := os.Stat(dir); err != nil || !info.IsDir() {
					t.Errorf("%s: %v, want a directory", dir, err)
				}
			}
			for dir, want := range map[string]map[string]string{intentsDir: wantIntents, pulledDir: wantPulled} {
				for f, content := range want {
					if got, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(got) != content {
						t.Errorf("%s: %q (%v), want %q", f, got, err, content)
					}
				}
			}
		})
	}
}

// TestRecordsEncoding checks the files are upstream's: name and content.
func TestRecordsEncoding(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	f := &fsRecords{pullingDir: filepath.Join(dir, "pulling"), pulledDir: filepath.Join(dir, "pulled")}

	if err := f.WriteImagePullIntent(ctx, "repo.repo/test/test:latest"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(f.pullingDir, "sha256-7d8c031e2f1aeaa71649ca3e0b64c9902370ed460ef57fb07582a87a5a1e1c02"))
	if want := `{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1beta1","image":"repo.repo/test/test:latest"}` + "\n"; err != nil || string(got) != want {
		t.Errorf("intent file %q (%v), want %q", got, err, want)
	}

	record := &kubeletconfigv1beta1.ImagePulledRecord{
		LastUpdatedTime: metav1.NewTime(time.Date(2024, 10, 21, 12, 26, 40, 0, time.UTC)),
		ImageRef:        "testimageref",
		CredentialMapping: map[string]kubeletconfigv1beta1.ImagePullCredentials{
			"docker.io/testing/test": {KubernetesSecrets: []kubeletconfigv1beta1.ImagePullSecret{
				{UID: "testsecretuid", Namespace: "default", Name: "pull-secret", CredentialHash: "testsecrethash"}}},
		},
	}
	if err := f.WriteImagePulledRecord(ctx, record); err != nil {
		t.Fatal(err)
	}
	if record.Kind != "" || record.APIVersion != "" {
		t.Errorf("writing changed the record's TypeMeta: %+v", record.TypeMeta)
	}
	const file = "sha256-b3c0cc4278800b03a308ceb2611161430df571ca733122f0a40ac8b9792a9064"
	want, _ := os.ReadFile(filepath.Join("testdata", "pulled", file))
	if got, err := os.ReadFile(filepath.Join(f.pulledDir, file)); err != nil || string(got) != string(want)+"\n" {
		t.Errorf("pulled record file %q (%v), want %q", got, err, want)
	}

	// and what is written reads back the same, without TypeMeta
	gotRecord, exists, err := f.GetImagePulledRecord("testimageref")
	if err == nil && gotRecord.LastUpdatedTime.Equal(&record.LastUpdatedTime) {
		gotRecord.LastUpdatedTime = record.LastUpdatedTime // in the local time zone
	}
	if err != nil || !exists || !reflect.DeepEqual(gotRecord, record) {
		t.Errorf("GetImagePulledRecord() = %+v, %v, %v; want %+v", gotRecord, exists, err, record)
	}
}

func TestDecodeRecords(t *testing.T) {
	read := func(dir, f string) []byte {
		data, err := os.ReadFile(filepath.Join("testdata", dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	// v1alpha1 converts field by field, nil stays nil
	got, current, err := decodePulledRecord(read("pulled", "sha256-917e8b3439bf8a7a6f37ffd2d2ddfdfafac8a251bf214a0be39675742b420b1a"))
	want := &kubeletconfigv1beta1.ImagePulledRecord{
		LastUpdatedTime: metav1.NewTime(time.Date(2024, 10, 21, 12, 26, 40, 0, time.UTC)),
		ImageRef:        "testimageref-sa",
		CredentialMapping: map[string]kubeletconfigv1beta1.ImagePullCredentials{
			"docker.io/testing/test": {KubernetesServiceAccounts: []kubeletconfigv1beta1.ImagePullServiceAccount{
				{UID: "test-sa-uid", Namespace: "default", Name: "test-sa"}}},
		},
	}
	if err != nil || current || !got.LastUpdatedTime.Equal(&want.LastUpdatedTime) {
		t.Fatalf("decodePulledRecord() = %+v, %v, %v", got, current, err)
	}
	got.LastUpdatedTime = want.LastUpdatedTime
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decodePulledRecord() = %+v, want %+v", got, want)
	}

	intent, current, err := decodeIntent(read("pulling", "sha256-aef2af226629a35d5f3ef0fdbb29fdbebf038d0acd8850590e8c48e1e283aa56"))
	if err != nil || !current || !reflect.DeepEqual(intent, &kubeletconfigv1beta1.ImagePullIntent{Image: "docker.io/testing/test:latest"}) {
		t.Errorf("decodeIntent() = %+v, %v, %v", intent, current, err)
	}

	for name, data := range map[string]string{
		"broken JSON":     string(read("pulled", "sha256-e766e4624f9bc4d3847d6c5b470d9d5362cc8d0c250bd9572daf95278e044263")),
		"unknown field":   `{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1beta1","image":"a","extra":1}`,
		"duplicate field": `{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1beta1","image":"a","image":"b"}`,
		"wrong kind":      `{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1","imageRef":"a","lastUpdatedTime":null}`,
		"no apiVersion":   `{"kind":"ImagePullIntent","image":"a"}`,
	} {
		if _, _, err := decodeIntent([]byte(data)); err == nil {
			t.Errorf("%s: decodeIntent() succeeded", name)
		}
	}
}
