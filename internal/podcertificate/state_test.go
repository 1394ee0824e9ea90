package podcertificate

import (
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC)

func TestClassifyRequest(t *testing.T) {
	cond := func(typ string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: typ + "Reason"}
	}
	for _, tc := range []struct {
		name       string
		conds      []metav1.Condition
		want       requestOutcome
		wantReason string
	}{
		{name: "no conditions", want: requestPending},
		{name: "other condition", conds: []metav1.Condition{cond("SomethingElse")}, want: requestPending},
		{name: "denied", conds: []metav1.Condition{cond("Denied")}, want: requestDenied, wantReason: "DeniedReason"},
		{name: "failed", conds: []metav1.Condition{cond("Failed")}, want: requestFailed, wantReason: "FailedReason"},
		{name: "issued", conds: []metav1.Condition{cond("Issued")}, want: requestIssued, wantReason: "IssuedReason"},
		{name: "first terminal wins", conds: []metav1.Condition{cond("Other"), cond("Failed"), cond("Issued")}, want: requestFailed, wantReason: "FailedReason"},
		{name: "issued before denied", conds: []metav1.Condition{cond("Issued"), cond("Denied")}, want: requestIssued, wantReason: "IssuedReason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pcr := &certificatesv1.PodCertificateRequest{Status: certificatesv1.PodCertificateRequestStatus{Conditions: tc.conds}}
			got, c := classifyRequest(pcr)
			if got != tc.want || c.Reason != tc.wantReason {
				t.Errorf("got %v (%q), want %v (%q)", got, c.Reason, tc.want, tc.wantReason)
			}
		})
	}
}

func TestIssuedCredential(t *testing.T) {
	chain := "junk\n-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n"
	for _, tc := range []struct {
		name    string
		status  certificatesv1.PodCertificateRequestStatus
		want    issued
		wantErr bool
	}{{
		name: "issued",
		status: certificatesv1.PodCertificateRequestStatus{
			CertificateChain: chain,
			BeginRefreshAt:   ptr.To(metav1.NewTime(t0.Add(time.Hour))),
			NotAfter:         ptr.To(metav1.NewTime(t0.Add(2 * time.Hour))),
		},
		want: issued{
			privateKey:     []byte("key"),
			certChain:      []byte("-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n"),
			beginRefreshAt: t0.Add(time.Hour + time.Minute), // jittered
			notAfter:       t0.Add(2 * time.Hour),
		},
	}, {
		name:    "no beginRefreshAt",
		status:  certificatesv1.PodCertificateRequestStatus{CertificateChain: chain, NotAfter: ptr.To(metav1.NewTime(t0))},
		wantErr: true,
	}, {
		name:    "no notAfter",
		status:  certificatesv1.PodCertificateRequestStatus{CertificateChain: chain, BeginRefreshAt: ptr.To(metav1.NewTime(t0))},
		wantErr: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			pcr := &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}, Status: tc.status}
			got, err := issuedCredential(pcr, []byte("key"), time.Minute)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v", err)
			}
			if err != nil {
				return
			}
			if string(got.privateKey) != string(tc.want.privateKey) || string(got.certChain) != string(tc.want.certChain) ||
				!got.beginRefreshAt.Equal(tc.want.beginRefreshAt) || !got.notAfter.Equal(tc.want.notAfter) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestTimeDecisions(t *testing.T) {
	begin, notAfter := t0, t0.Add(time.Hour)
	for _, tc := range []struct {
		name                     string
		now                      time.Time
		due, overdue, expiredNow bool
		state                    string
	}{
		{name: "before beginRefreshAt", now: begin.Add(-time.Nanosecond), state: StateFresh},
		{name: "at beginRefreshAt", now: begin, due: true, state: StateFresh},
		{name: "at overdue threshold", now: begin.Add(refreshOverdueDuration), due: true, state: StateFresh},
		{name: "past overdue threshold", now: begin.Add(refreshOverdueDuration + time.Nanosecond), due: true, overdue: true, state: StateOverdueForRefresh},
		{name: "at notAfter", now: notAfter, due: true, overdue: true, state: StateOverdueForRefresh},
		{name: "past notAfter", now: notAfter.Add(time.Nanosecond), due: true, overdue: true, expiredNow: true, state: StateExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := refreshDue(tc.now, begin); got != tc.due {
				t.Errorf("refreshDue = %v", got)
			}
			if got := refreshOverdue(tc.now, begin); got != tc.overdue {
				t.Errorf("refreshOverdue = %v", got)
			}
			if got := expired(tc.now, notAfter); got != tc.expiredNow {
				t.Errorf("expired = %v", got)
			}
			if got := issuedMetricsState(tc.now, begin, notAfter); got != tc.state {
				t.Errorf("issuedMetricsState = %q", got)
			}
		})
	}
}

func TestAssumedDeleted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		notFound bool
		now      time.Time
		want     bool
	}{
		{name: "found", now: t0.Add(time.Hour)},
		{name: "not found before abandon time", notFound: true, now: t0},
		{name: "not found after abandon time", notFound: true, now: t0.Add(time.Nanosecond), want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := assumedDeleted(tc.notFound, tc.now, t0); got != tc.want {
				t.Errorf("got %v", got)
			}
		})
	}
}

func TestDueWarnings(t *testing.T) {
	begin, notAfter := t0, t0.Add(time.Hour)
	for _, tc := range []struct {
		name                      string
		now                       time.Time
		sentOverdue, sentExpired  bool
		wantOverdue, wantExpiredN bool
	}{
		{name: "fresh", now: begin},
		{name: "overdue", now: begin.Add(time.Minute + refreshOverdueDuration), wantOverdue: true},
		{name: "overdue, sent", now: begin.Add(time.Minute + refreshOverdueDuration), sentOverdue: true},
		{name: "expired", now: notAfter.Add(time.Second), wantOverdue: true, wantExpiredN: true},
		{name: "expired, overdue sent", now: notAfter.Add(time.Second), sentOverdue: true, wantExpiredN: true},
		{name: "expired, both sent", now: notAfter.Add(time.Second), sentOverdue: true, sentExpired: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &issued{beginRefreshAt: begin, notAfter: notAfter, eventEmittedForOverdueForRefresh: tc.sentOverdue, eventEmittedForExpiration: tc.sentExpired}
			o, e := dueWarnings(tc.now, c)
			if o != tc.wantOverdue || e != tc.wantExpiredN {
				t.Errorf("got overdue %v expired %v", o, e)
			}
		})
	}
}

// The bundle of each state, and its metric state.
func TestStates(t *testing.T) {
	fresh := issued{privateKey: []byte("k"), certChain: []byte("c"), beginRefreshAt: t0, notAfter: t0.Add(time.Hour)}
	for _, tc := range []struct {
		name      string
		state     credState
		wantKey   string
		wantErr   string
		wantState string
	}{
		{name: "initial", state: &credStateInitial{}, wantErr: "credential bundle is not issued yet", wantState: StateNotYetIssued},
		{name: "wait", state: &credStateWait{privateKey: []byte("k")}, wantErr: "credential bundle is not issued yet", wantState: StateNotYetIssued},
		{name: "denied", state: &credStateDenied{Reason: "R", Message: "M"}, wantErr: `PodCertificateRequest was permanently denied: reason="R" message="M"`, wantState: StateDenied},
		{name: "failed", state: &credStateFailed{Reason: "R", Message: "M"}, wantErr: `PodCertificateRequest was permanently failed: reason="R" message="M"`, wantState: StateFailed},
		{name: "fresh", state: &credStateFresh{issued: fresh}, wantKey: "k", wantState: StateFresh},
		{name: "wait refresh", state: &credStateWaitRefresh{issued: fresh, refreshPrivateKey: []byte("new")}, wantKey: "k", wantState: StateFresh},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, c, err := tc.state.getCredBundle()
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || k != nil || c != nil {
					t.Errorf("got %q %q %v, want error %s", k, c, err, tc.wantErr)
				}
			} else if err != nil || string(k) != tc.wantKey || string(c) != "c" {
				t.Errorf("got %q %q %v", k, c, err)
			}
			if got := tc.state.metricsState(t0); got != tc.wantState {
				t.Errorf("metricsState %q, want %q", got, tc.wantState)
			}
		})
	}
}

func TestJitterDuration(t *testing.T) {
	for range 100 {
		if d := jitterDuration(); d < 0 || d >= maxJitter {
			t.Fatalf("jitter %v", d)
		}
	}
}
