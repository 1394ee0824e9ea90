package apiutil

import (
	"context"

	"github.com/nodelet/nodelet/internal/apiclient"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeletePodNow deletes pod with grace 0 and its UID as precondition, so a
// newer pod of the same name is never touched. A pod already gone or
// replaced is not an error.
func DeletePodNow(ctx context.Context, client apiclient.Interface, pod *v1.Pod) error {
	uid := pod.UID
	err := client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
