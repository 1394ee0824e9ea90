package apiutil

import (
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Contact follows whether the API server answers: every response (of any
// status but 502, 503 and 504) counts as contact, every request that got
// none (a connection error, a timeout) as trouble. Requests the caller
// cancelled count as neither.
type Contact struct {
	clock clock.PassiveClock
	// lastOK and downSince are Unix nanoseconds, zero when unset.
	lastOK, downSince atomic.Int64
}

// NewContact returns a Contact that has not seen the API server yet; c
// defaults to the real clock.
func NewContact(c clock.PassiveClock) *Contact {
	if c == nil {
		c = clock.RealClock{}
	}
	return &Contact{clock: c}
}

// Wrap is a rest.Config WrapTransport: it records each request's outcome.
func (c *Contact) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper{c: c, next: rt}
}

type roundTripper struct {
	c    *Contact
	next http.RoundTripper
}

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	switch {
	case req.Context().Err() != nil:
	case err != nil || resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout:
		r.c.Failed()
	default:
		r.c.Succeeded()
	}
	return resp, err
}

// Succeeded records an answer from the API server.
func (c *Contact) Succeeded() {
	c.lastOK.Store(c.clock.Now().UnixNano())
	c.downSince.Store(0)
}

// Failed records a request the API server did not answer.
func (c *Contact) Failed() {
	c.downSince.CompareAndSwap(0, c.clock.Now().UnixNano())
}

// Down reports whether the API server's last request went unanswered, and
// since when it has been failing.
func (c *Contact) Down() (bool, time.Time) {
	d := c.downSince.Load()
	if d == 0 {
		return false, time.Time{}
	}
	return true, time.Unix(0, d)
}

// LastAnswer is when the API server last answered (zero: never, since
// start).
func (c *Contact) LastAnswer() time.Time {
	if v := c.lastOK.Load(); v != 0 {
		return time.Unix(0, v)
	}
	return time.Time{}
}
