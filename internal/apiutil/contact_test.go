package apiutil

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

type answer struct {
	code int
	err  error
}

func (a answer) RoundTrip(*http.Request) (*http.Response, error) {
	if a.err != nil {
		return nil, a.err
	}
	return &http.Response{StatusCode: a.code, Body: http.NoBody}, nil
}

func TestContact(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	c := NewContact(clk)
	do := func(ctx context.Context, a answer) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api/", nil)
		_, _ = c.Wrap(a).RoundTrip(req)
	}
	if down, _ := c.Down(); down || !c.LastAnswer().IsZero() {
		t.Fatalf("new contact: down %v, last answer %v", down, c.LastAnswer())
	}
	do(context.Background(), answer{code: http.StatusNotFound}) // an answer, if not a happy one
	if down, _ := c.Down(); down || !c.LastAnswer().Equal(start) {
		t.Fatalf("after a 404: down %v, last answer %v", down, c.LastAnswer())
	}
	clk.SetTime(start.Add(time.Minute))
	do(context.Background(), answer{err: errors.New("connection refused")})
	clk.SetTime(start.Add(2 * time.Minute))
	do(context.Background(), answer{code: http.StatusServiceUnavailable})
	if down, since := c.Down(); !down || !since.Equal(start.Add(time.Minute)) {
		t.Fatalf("after failures: down %v since %v, want since the first failure", down, since)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	clk.SetTime(start.Add(3 * time.Minute))
	do(ctx, answer{code: http.StatusOK}) // cancelled by the caller: neither
	if down, _ := c.Down(); !down {
		t.Fatal("a cancelled request counted as contact")
	}
	do(context.Background(), answer{code: http.StatusOK})
	if down, _ := c.Down(); down || !c.LastAnswer().Equal(start.Add(3*time.Minute)) {
		t.Fatalf("after an answer: down %v, last answer %v", down, c.LastAnswer())
	}
}
