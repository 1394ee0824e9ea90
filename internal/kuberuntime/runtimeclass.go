package kuberuntime

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/internal/apiclient"
)

// RuntimeClassHandlers resolves a RuntimeClass to its handler through the
// API (Config.RuntimeHandlers; a pod's RuntimeClass rarely changes: no
// cache beyond the client's).
func RuntimeClassHandlers(client apiclient.Interface) func(ctx context.Context, name string) (string, error) {
	return func(ctx context.Context, name string) (string, error) {
		rc, err := client.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("RuntimeClass %q not found", name)
		}
		if err != nil {
			return "", fmt.Errorf("RuntimeClass %q: %w", name, err)
		}
		return rc.Handler, nil
	}
}
