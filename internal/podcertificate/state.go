package podcertificate

import (
	"errors"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// After this amount of time (plus jitter) since its creation, a
// PodCertificateRequest we created that the informer does not have is
// assumed deleted, as upstream.
const assumeDeletedThreshold = 10 * time.Minute

// After this amount of time since the beginRefreshAt of the certificate, a
// certificate is overdue for refresh, as upstream.
const refreshOverdueDuration = 10 * time.Minute

// maxJitter bounds the random delay added to beginRefreshAt and to the
// abandon time, so that sources do not create their requests together.
const maxJitter = 5 * time.Minute

// Metric states of a source (kubelet_podcertificate_states{state}).
const (
	StateNotYetIssued      = "not_yet_issued"
	StateDenied            = "denied"
	StateFailed            = "failed"
	StateFresh             = "fresh"
	StateOverdueForRefresh = "overdue_for_refresh"
	StateExpired           = "expired"
)

// credState is the state of one projection. The state machine, as
// upstream:
//
//	                        ┌─────────────────┐
//	                        ▼                 │
//	initial ────► wait ────► fresh ──────► waitrefresh
//	                │                           │
//	                ├──────► denied ◄───────────┤
//	                │                           │
//	                └──────► failed ◄───────────┘
type credState interface {
	getCredBundle() (privKey, certChain []byte, err error)
	metricsState(now time.Time) string
}

var errNotIssued = errors.New("credential bundle is not issued yet")

// credStateInitial: no request created yet.
type credStateInitial struct{}

func (c *credStateInitial) getCredBundle() ([]byte, []byte, error) { return nil, nil, errNotIssued }
func (c *credStateInitial) metricsState(time.Time) string          { return StateNotYetIssued }

// credStateWait: the first request is created, not yet answered.
type credStateWait struct {
	privateKey []byte
	pcrName    string
	// Once reached, a request the informer does not have is assumed
	// deleted.
	pcrAbandonAt time.Time
}

func (c *credStateWait) getCredBundle() ([]byte, []byte, error) { return nil, nil, errNotIssued }
func (c *credStateWait) metricsState(time.Time) string          { return StateNotYetIssued }

// credStateDenied: the signer denied a request; final.
type credStateDenied struct {
	Reason  string
	Message string
}

func (c *credStateDenied) getCredBundle() ([]byte, []byte, error) {
	return nil, nil, fmt.Errorf("PodCertificateRequest was permanently denied: reason=%q message=%q", c.Reason, c.Message)
}
func (c *credStateDenied) metricsState(time.Time) string { return StateDenied }

// credStateFailed: the signer failed a request; final.
type credStateFailed struct {
	Reason  string
	Message string
}

func (c *credStateFailed) getCredBundle() ([]byte, []byte, error) {
	return nil, nil, fmt.Errorf("PodCertificateRequest was permanently failed: reason=%q message=%q", c.Reason, c.Message)
}
func (c *credStateFailed) metricsState(time.Time) string { return StateFailed }

// issued is a credential the signer issued, and which warning events were
// sent about it.
type issued struct {
	privateKey                       []byte
	certChain                        []byte
	beginRefreshAt                   time.Time
	notAfter                         time.Time
	eventEmittedForOverdueForRefresh bool
	eventEmittedForExpiration        bool
}

func (c *issued) getCredBundle() ([]byte, []byte, error) { return c.privateKey, c.certChain, nil }
func (c *issued) metricsState(now time.Time) string {
	return issuedMetricsState(now, c.beginRefreshAt, c.notAfter)
}

// credStateFresh: a credential is issued; no refresh request yet.
type credStateFresh struct {
	issued
}

// credStateWaitRefresh: a credential is issued (and still served) and a
// refresh request is created, not yet answered.
type credStateWaitRefresh struct {
	issued

	refreshPrivateKey []byte
	refreshPCRName    string
	// Once reached, a refresh request the informer does not have is
	// assumed deleted.
	refreshPCRAbandonAt time.Time
}

// requestOutcome is what a PodCertificateRequest's conditions say.
type requestOutcome int

const (
	requestPending requestOutcome = iota
	requestDenied
	requestFailed
	requestIssued
)

// classifyRequest returns the outcome of pcr and the condition that says
// it: the first Denied, Failed or Issued condition, as upstream (the
// condition's status is not looked at; the API allows only True).
func classifyRequest(pcr *certificatesv1.PodCertificateRequest) (requestOutcome, metav1.Condition) {
	for _, cond := range pcr.Status.Conditions {
		switch cond.Type {
		case certificatesv1.PodCertificateRequestConditionTypeDenied:
			return requestDenied, cond
		case certificatesv1.PodCertificateRequestConditionTypeFailed:
			return requestFailed, cond
		case certificatesv1.PodCertificateRequestConditionTypeIssued:
			return requestIssued, cond
		}
	}
	return requestPending, metav1.Condition{}
}

// issuedCredential is the credential of an issued request signed for
// privateKey: its chain cleaned of everything but the certificates, and
// beginRefreshAt delayed by jitter. It fails when the status lacks
// beginRefreshAt or notAfter (which the API requires of an issued request;
// upstream would crash).
func issuedCredential(pcr *certificatesv1.PodCertificateRequest, privateKey []byte, jitter time.Duration) (issued, error) {
	st := pcr.Status
	if st.BeginRefreshAt == nil || st.NotAfter == nil {
		return issued{}, fmt.Errorf("PodCertificateRequest %q is issued without beginRefreshAt or notAfter", pcr.Namespace+"/"+pcr.Name)
	}
	return issued{
		privateKey:     privateKey,
		certChain:      cleanCertificateChain([]byte(st.CertificateChain)),
		beginRefreshAt: st.BeginRefreshAt.Time.Add(jitter),
		notAfter:       st.NotAfter.Time,
	}, nil
}

// refreshDue reports whether a credential must be refreshed at now: from
// its (jittered) beginRefreshAt on.
func refreshDue(now, beginRefreshAt time.Time) bool {
	return !now.Before(beginRefreshAt)
}

// refreshOverdue reports whether a credential not yet refreshed at now is
// overdue: more than refreshOverdueDuration past beginRefreshAt.
func refreshOverdue(now, beginRefreshAt time.Time) bool {
	return now.After(beginRefreshAt.Add(refreshOverdueDuration))
}

// expired reports whether a credential is expired at now.
func expired(now, notAfter time.Time) bool {
	return now.After(notAfter)
}

// assumedDeleted reports whether a request the informer does not have
// (notFound) is to be taken as deleted at now: from abandonAt on (before,
// the informer may just lag behind).
func assumedDeleted(notFound bool, now, abandonAt time.Time) bool {
	return notFound && now.After(abandonAt)
}

// issuedMetricsState is the metric state of an issued credential at now.
func issuedMetricsState(now, beginRefreshAt, notAfter time.Time) string {
	switch {
	case expired(now, notAfter):
		return StateExpired
	case refreshOverdue(now, beginRefreshAt):
		return StateOverdueForRefresh
	}
	return StateFresh
}

// dueWarnings returns which warning events c calls for at now and were not
// sent yet: CertificateOverdueForRefresh, CertificateExpired.
func dueWarnings(now time.Time, c *issued) (overdue, expiredNow bool) {
	return refreshOverdue(now, c.beginRefreshAt) && !c.eventEmittedForOverdueForRefresh,
		expired(now, c.notAfter) && !c.eventEmittedForExpiration
}
