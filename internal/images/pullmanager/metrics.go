package pullmanager

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// mustAttemptImagePullResult is the result label of
// kubelet_imagemanager_image_mustpull_checks_total.
type mustAttemptImagePullResult string

const (
	checkResultCredentialPolicyAllowed mustAttemptImagePullResult = "credentialPolicyAllowed"
	checkResultCredentialRecordFound   mustAttemptImagePullResult = "credentialRecordFound"
	checkResultMustAuthenticate        mustAttemptImagePullResult = "mustAuthenticate"
	checkResultError                   mustAttemptImagePullResult = "error"
)

// metrics are upstream's image pull manager metrics: same names, labels and
// help (with component-base's "[ALPHA] " prefix).
type metrics struct {
	fsIntents, fsPulledRecords   namedGauge
	memIntents, memPulledRecords namedGauge
	mustPullChecks               *prometheus.CounterVec
}

// namedGauge is a gauge and its name without the subsystem, for logs.
type namedGauge struct {
	prometheus.Gauge
	name string
}

// newMetrics registers the metrics with reg (none when nil).
func newMetrics(reg prometheus.Registerer) *metrics {
	gauge := func(name, help string) namedGauge {
		return namedGauge{prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubelet", Name: name, Help: "[ALPHA] " + help}), name}
	}
	m := &metrics{
		fsIntents:        gauge("imagemanager_ondisk_pullintents", "Number of ImagePullIntents stored on disk."),
		fsPulledRecords:  gauge("imagemanager_ondisk_pulledrecords", "Number of ImagePulledRecords stored on disk."),
		memIntents:       gauge("imagemanager_inmemory_pullintents_usage_percent", "The ImagePullIntents in-memory cache usage in percent."),
		memPulledRecords: gauge("imagemanager_inmemory_pulledrecords_usage_percent", "The ImagePulledRecords in-memory cache usage in percent."),
		mustPullChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "imagemanager_image_mustpull_checks_total",
			Help: "[ALPHA] Counter for how many times kubelet checked whether credentials need to be re-verified to access an image",
		}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.fsIntents, m.fsPulledRecords, m.memIntents, m.memPulledRecords, m.mustPullChecks)
	}
	return m
}

// sizedRecords is a recordsAccessor that can tell its size.
type sizedRecords interface {
	recordsAccessor
	intentsSize() (uint, error)
	pulledRecordsSize() (uint, error)
}

// meteringRecords sets the size gauges after each write and delete.
type meteringRecords struct {
	sizedRecords
	intents, pulledRecords namedGauge
}

func (m *meteringRecords) WriteImagePullIntent(ctx context.Context, image string) error {
	if err := m.sizedRecords.WriteImagePullIntent(ctx, image); err != nil {
		return err
	}
	m.recordIntentsSize(ctx)
	return nil
}

func (m *meteringRecords) DeleteImagePullIntent(ctx context.Context, image string) error {
	if err := m.sizedRecords.DeleteImagePullIntent(ctx, image); err != nil {
		return err
	}
	m.recordIntentsSize(ctx)
	return nil
}

func (m *meteringRecords) WriteImagePulledRecord(ctx context.Context, record *kubeletconfigv1beta1.ImagePulledRecord) error {
	if err := m.sizedRecords.WriteImagePulledRecord(ctx, record); err != nil {
		return err
	}
	m.recordPulledRecordsSize(ctx)
	return nil
}

func (m *meteringRecords) DeleteImagePulledRecord(ctx context.Context, imageRef string) error {
	if err := m.sizedRecords.DeleteImagePulledRecord(ctx, imageRef); err != nil {
		return err
	}
	m.recordPulledRecordsSize(ctx)
	return nil
}

func (m *meteringRecords) recordIntentsSize(ctx context.Context) {
	n, err := m.intentsSize()
	if err != nil {
		klog.FromContext(ctx).V(4).Info("failed to read number of ImagePullIntents, can't update metric", "metricName", m.intents.name, "error", err)
		return
	}
	m.intents.Set(float64(n))
}

func (m *meteringRecords) recordPulledRecordsSize(ctx context.Context) {
	n, err := m.pulledRecordsSize()
	if err != nil {
		klog.FromContext(ctx).V(4).Info("failed to read number of ImagePulledRecords, can't update metric", "metricName", m.pulledRecords.name, "error", err)
		return
	}
	m.pulledRecords.Set(float64(n))
}
