package pullmanager

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
	kubeletconfigv1alpha1 "k8s.io/kubelet/config/v1alpha1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// recordsAccessor reads and writes ImagePullIntents and ImagePulledRecords,
// whatever stores them (upstream's PullRecordsAccessor). Lists may return
// what they could read along with an aggregated error.
type recordsAccessor interface {
	ListImagePullIntents() ([]*kubeletconfigv1beta1.ImagePullIntent, error)
	ImagePullIntentExists(image string) (bool, error)
	WriteImagePullIntent(ctx context.Context, image string) error
	DeleteImagePullIntent(ctx context.Context, image string) error

	ListImagePulledRecords() ([]*kubeletconfigv1beta1.ImagePulledRecord, error)
	// GetImagePulledRecord returns exists=true with the error when the
	// record is there but cannot be decoded.
	GetImagePulledRecord(imageRef string) (record *kubeletconfigv1beta1.ImagePulledRecord, exists bool, err error)
	WriteImagePulledRecord(ctx context.Context, record *kubeletconfigv1beta1.ImagePulledRecord) error
	DeleteImagePulledRecord(ctx context.Context, imageRef string) error
}

const (
	cacheFilesSHA256Prefix = "sha256-"
	tmpFilesSuffix         = ".tmp"
)

// encodeVersion is the version records are written in, as upstream.
var encodeVersion = kubeletconfigv1beta1.SchemeGroupVersion

var (
	recordsScheme = runtime.NewScheme()
	// recordsEncoder writes v1beta1 JSON; recordsDecoder reads v1alpha1 and
	// v1beta1 strictly (unknown and duplicate fields are errors), as
	// upstream's codecs.
	recordsEncoder runtime.Encoder
	recordsDecoder runtime.Decoder
)

func init() {
	utilruntime.Must(kubeletconfigv1beta1.AddToScheme(recordsScheme))
	utilruntime.Must(kubeletconfigv1alpha1.AddToScheme(recordsScheme))
	codecs := serializer.NewCodecFactory(recordsScheme, serializer.EnableStrict)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		panic("no JSON serializer")
	}
	recordsEncoder = codecs.EncoderForVersion(info.Serializer, encodeVersion)
	recordsDecoder = codecs.UniversalDeserializer()
}

// encodeRecord encodes a copy of obj (the encoder sets and resets its
// TypeMeta, and obj may be shared).
func encodeRecord[T any, PT interface {
	*T
	runtime.Object
}](obj PT) ([]byte, error) {
	c := PT(new(T))
	*c = *obj
	var buf bytes.Buffer
	if err := recordsEncoder.Encode(c, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeIntent returns the intent in data and whether it is in the
// current version.
func decodeIntent(data []byte) (*kubeletconfigv1beta1.ImagePullIntent, bool, error) {
	obj, gvk, err := recordsDecoder.Decode(data, nil, nil)
	if err != nil {
		return nil, false, err
	}
	current := gvk.Version == encodeVersion.Version
	switch o := obj.(type) {
	case *kubeletconfigv1beta1.ImagePullIntent:
		o.TypeMeta = metav1.TypeMeta{}
		return o, current, nil
	case *kubeletconfigv1alpha1.ImagePullIntent:
		return &kubeletconfigv1beta1.ImagePullIntent{Image: o.Image}, current, nil
	}
	return nil, false, fmt.Errorf("failed to convert object to *ImagePullIntent: %T", obj)
}

// decodePulledRecord returns the pulled record in data and whether it is in
// the current version.
func decodePulledRecord(data []byte) (*kubeletconfigv1beta1.ImagePulledRecord, bool, error) {
	obj, gvk, err := recordsDecoder.Decode(data, nil, nil)
	if err != nil {
		return nil, false, err
	}
	current := gvk.Version == encodeVersion.Version
	switch o := obj.(type) {
	case *kubeletconfigv1beta1.ImagePulledRecord:
		o.TypeMeta = metav1.TypeMeta{}
		return o, current, nil
	case *kubeletconfigv1alpha1.ImagePulledRecord:
		return pulledRecordFromV1alpha1(o), current, nil
	}
	return nil, false, fmt.Errorf("failed to convert object to *ImagePulledRecord: %T", obj)
}

// pulledRecordFromV1alpha1 converts r field by field (the versions have
// the same fields), keeping nil maps and slices nil.
func pulledRecordFromV1alpha1(r *kubeletconfigv1alpha1.ImagePulledRecord) *kubeletconfigv1beta1.ImagePulledRecord {
	out := &kubeletconfigv1beta1.ImagePulledRecord{LastUpdatedTime: r.LastUpdatedTime, ImageRef: r.ImageRef}
	if r.CredentialMapping != nil {
		out.CredentialMapping = make(map[string]kubeletconfigv1beta1.ImagePullCredentials, len(r.CredentialMapping))
	}
	for image, c := range r.CredentialMapping {
		creds := kubeletconfigv1beta1.ImagePullCredentials{NodePodsAccessible: c.NodePodsAccessible}
		if c.KubernetesSecrets != nil {
			creds.KubernetesSecrets = make([]kubeletconfigv1beta1.ImagePullSecret, 0, len(c.KubernetesSecrets))
		}
		for _, s := range c.KubernetesSecrets {
			creds.KubernetesSecrets = append(creds.KubernetesSecrets, kubeletconfigv1beta1.ImagePullSecret(s))
		}
		if c.KubernetesServiceAccounts != nil {
			creds.KubernetesServiceAccounts = make([]kubeletconfigv1beta1.ImagePullServiceAccount, 0, len(c.KubernetesServiceAccounts))
		}
		for _, sa := range c.KubernetesServiceAccounts {
			creds.KubernetesServiceAccounts = append(creds.KubernetesServiceAccounts, kubeletconfigv1beta1.ImagePullServiceAccount(sa))
		}
		out.CredentialMapping[image] = creds
	}
	return out
}

// fsRecords keeps the records in files: ImagePullIntents in pullingDir,
// ImagePulledRecords in pulledDir, each named by the SHA-256 of its image
// or image reference.
type fsRecords struct {
	pullingDir string
	pulledDir  string
}

// newFSRecords creates <rootDir>/image_manager/{pulling,pulled} and rewrites
// the records of older versions in the current one.
func newFSRecords(ctx context.Context, rootDir string, m *metrics) (recordsAccessor, error) {
	f := &fsRecords{
		pullingDir: filepath.Join(rootDir, "image_manager", "pulling"),
		pulledDir:  filepath.Join(rootDir, "image_manager", "pulled"),
	}
	if err := os.MkdirAll(f.pullingDir, 0700); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(f.pulledDir, 0700); err != nil {
		return nil, err
	}
	f.recordsVersionMigration(ctx)
	return &meteringRecords{sizedRecords: f, intents: m.fsIntents, pulledRecords: m.fsPulledRecords}, nil
}

func (f *fsRecords) recordsVersionMigration(ctx context.Context) {
	logger := klog.FromContext(ctx)
	err := processDirFiles(f.pullingDir, func(filePath string, content []byte) error {
		intent, current, err := decodeIntent(content)
		if err != nil {
			return fmt.Errorf("failed to decode ImagePullIntent from file %q: %w", filePath, err)
		}
		if !current {
			if err := f.WriteImagePullIntent(ctx, intent.Image); err != nil {
				return fmt.Errorf("failed to migrate ImagePullIntent for image %q to the current version: %w", intent.Image, err)
			}
		}
		return nil
	})
	if err != nil {
		logger.Error(err, "Error migrating image pull intents")
	}
	err = processDirFiles(f.pulledDir, func(filePath string, content []byte) error {
		record, current, err := decodePulledRecord(content)
		if err != nil {
			return fmt.Errorf("failed to decode ImagePulledRecord from file %q: %w", filePath, err)
		}
		if !current {
			if err := f.WriteImagePulledRecord(ctx, record); err != nil {
				return fmt.Errorf("failed to migrate ImagePulledRecord for image ref %q to the current version: %w", record.ImageRef, err)
			}
		}
		return nil
	})
	if err != nil {
		logger.Error(err, "Error migrating image pulled records")
	}
}

func (f *fsRecords) WriteImagePullIntent(_ context.Context, image string) error {
	data, err := encodeRecord(&kubeletconfigv1beta1.ImagePullIntent{Image: image})
	if err != nil {
		return err
	}
	return writeFile(f.pullingDir, cacheFilename(image), data)
}

func (f *fsRecords) ListImagePullIntents() ([]*kubeletconfigv1beta1.ImagePullIntent, error) {
	var intents []*kubeletconfigv1beta1.ImagePullIntent
	err := processDirFiles(f.pullingDir, func(filePath string, content []byte) error {
		intent, _, err := decodeIntent(content)
		if err != nil {
			return fmt.Errorf("failed to deserialize content of file %q into ImagePullIntent: %w", filePath, err)
		}
		intents = append(intents, intent)
		return nil
	})
	return intents, err
}

func (f *fsRecords) ImagePullIntentExists(image string) (bool, error) {
	data, err := os.ReadFile(filepath.Join(f.pullingDir, cacheFilename(image)))
	if os.IsNotExist(err) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	intent, _, err := decodeIntent(data)
	if err != nil {
		return false, err
	}
	return intent.Image == image, nil
}

func (f *fsRecords) DeleteImagePullIntent(_ context.Context, image string) error {
	return removeFile(filepath.Join(f.pullingDir, cacheFilename(image)))
}

func (f *fsRecords) GetImagePulledRecord(imageRef string) (*kubeletconfigv1beta1.ImagePulledRecord, bool, error) {
	data, err := os.ReadFile(filepath.Join(f.pulledDir, cacheFilename(imageRef)))
	if os.IsNotExist(err) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, err
	}
	record, _, err := decodePulledRecord(data)
	if err != nil {
		return nil, true, err
	}
	if record.ImageRef != imageRef {
		return nil, false, nil
	}
	return record, true, nil
}

func (f *fsRecords) ListImagePulledRecords() ([]*kubeletconfigv1beta1.ImagePulledRecord, error) {
	var records []*kubeletconfigv1beta1.ImagePulledRecord
	err := processDirFiles(f.pulledDir, func(filePath string, content []byte) error {
		record, _, err := decodePulledRecord(content)
		if err != nil {
			return fmt.Errorf("failed to deserialize content of file %q into ImagePulledRecord: %w", filePath, err)
		}
		records = append(records, record)
		return nil
	})
	return records, err
}

func (f *fsRecords) WriteImagePulledRecord(_ context.Context, record *kubeletconfigv1beta1.ImagePulledRecord) error {
	data, err := encodeRecord(record)
	if err != nil {
		return fmt.Errorf("failed to serialize ImagePulledRecord: %w", err)
	}
	return writeFile(f.pulledDir, cacheFilename(record.ImageRef), data)
}

func (f *fsRecords) DeleteImagePulledRecord(_ context.Context, imageRef string) error {
	return removeFile(filepath.Join(f.pulledDir, cacheFilename(imageRef)))
}

func (f *fsRecords) intentsSize() (uint, error)       { return countCacheFiles(f.pullingDir) }
func (f *fsRecords) pulledRecordsSize() (uint, error) { return countCacheFiles(f.pulledDir) }

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

func countCacheFiles(dirName string) (uint, error) {
	dir, err := os.Open(dirName)
	if err != nil {
		return 0, fmt.Errorf("failed to open directory %q: %w", dirName, err)
	}
	defer func() { _ = dir.Close() }()
	var n uint
	for {
		entries, err := dir.ReadDir(20)
		for _, e := range entries {
			if isValidCacheFile(e) {
				n++
			}
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return 0, fmt.Errorf("failed to list all entries in directory %q: %w", dirName, err)
		}
	}
}

// cacheFilename is the name of the record of an image or image reference.
func cacheFilename(image string) string {
	return fmt.Sprintf("%s%x", cacheFilesSHA256Prefix, sha256.Sum256([]byte(image)))
}

// isValidCacheFile tells a record file from directories and temporary files.
func isValidCacheFile(e os.DirEntry) bool {
	name := e.Name()
	return !e.IsDir() && strings.HasPrefix(name, cacheFilesSHA256Prefix) && !strings.HasSuffix(name, tmpFilesSuffix)
}

// writeFile writes content to dir/filename atomically: a temporary file
// renamed in place.
func writeFile(dir, filename string, content []byte) error {
	if err := os.MkdirAll(dir, 0700); err != nil {
		return fmt.Errorf("failed to create directory %q: %w", dir, err)
	}
	target := filepath.Join(dir, filename)
	tmp := target + tmpFilesSuffix
	if err := os.WriteFile(tmp, content, 0600); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("failed to create temporary file %q: %w", tmp, err)
	}
	if err := os.Rename(tmp, target); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// processDirFiles calls fileAction on the record files directly in dirName
// and aggregates the errors.
func processDirFiles(dirName string, fileAction func(filePath string, fileContent []byte) error) error {
	var errs []error
	err := filepath.WalkDir(dirName, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		if path == dirName {
			return nil
		}
		if d.IsDir() {
			return filepath.SkipDir
		}
		if name := d.Name(); !strings.HasPrefix(name, cacheFilesSHA256Prefix) || strings.HasSuffix(name, tmpFilesSuffix) {
			return nil
		}
		content, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to read %q: %w", path, err))
			return nil
		}
		if err := fileAction(path, content); err != nil {
			errs = append(errs, err)
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	return utilerrors.NewAggregate(errs)
}
