package credentialprovider

import (
	"context"
	"errors"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/internal/apiclient"
)

// APITokens is the TokenGetter of a node joined to a cluster: TokenRequest
// and a GET of the service account through the node's client (the
// provider's own cache keeps the exec, and so the token, from repeating).
type APITokens struct {
	Client apiclient.Interface
}

// ServiceAccountToken implements TokenGetter.
func (t APITokens) ServiceAccountToken(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	if t.Client == nil {
		return nil, errors.New("credentialprovider: APITokens without a client")
	}
	return t.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, tr, metav1.CreateOptions{})
}

// ServiceAccount implements TokenGetter.
func (t APITokens) ServiceAccount(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error) {
	if t.Client == nil {
		return nil, errors.New("credentialprovider: APITokens without a client")
	}
	return t.Client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
}
