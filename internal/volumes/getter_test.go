package volumes

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// A pod's first token request refused as Forbidden (the node authorizer has
// not yet seen the pod's binding) or NotFound (NodeRestriction's pod cache
// has not seen the pod) is retried quickly; a refusal that lasts, another
// error, or a renewal refused, is returned.
func TestTokenRetriesAFreshPodsRefusal(t *testing.T) {
	forbidden := apierrors.NewForbidden(v1.Resource("serviceaccounts"), "default", nil)
	notFound := apierrors.NewNotFound(v1.Resource("pods"), "p")
	invalid := apierrors.NewBadRequest("bad audience")
	for _, tc := range []struct {
		name      string
		refusal   error
		refusals  int32
		renewal   bool // the pod already has a token due for renewal
		wantErr   bool
		wantCalls int32
	}{
		{"granted at once", forbidden, 0, false, false, 1},
		{"forbidden twice, then granted", forbidden, 2, false, false, 3},
		{"pod not found twice, then granted", notFound, 2, false, false, 3},
		{"forbidden for good", forbidden, 100, false, true, 7},
		{"pod not found for good", notFound, 100, false, true, 7},
		{"bad request is not retried", invalid, 100, false, true, 1},
		{"renewal refused", forbidden, 100, true, true, 1},
	} {
		// In a synctest bubble, on the real clock, which is the bubble's
		// fake one: the retries' waits pass as soon as Token waits.
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				client := fake.NewSimpleClientset()
				var calls atomic.Int32
				client.PrependReactor("create", "serviceaccounts", func(a clienttesting.Action) (bool, runtime.Object, error) {
					if calls.Add(1) <= tc.refusals {
						return true, nil, tc.refusal
					}
					return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
						Token: "t", ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Hour)),
					}}, nil
				})
				g := newAPIGetter(t, APIGetterConfig{Client: client, TTL: time.Minute})
				pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
				if tc.renewal {
					g.tokens["u/default//3600"] = token{value: "old", renewAt: time.Now().Add(-time.Second)}
				}
				_, err := g.Token(context.Background(), pod, "default", "", 3600)
				if (err != nil) != tc.wantErr || calls.Load() != tc.wantCalls {
					t.Fatalf("err %v after %d calls; want error %v after %d", err, calls.Load(), tc.wantErr, tc.wantCalls)
				}
			})
		})
	}
}
