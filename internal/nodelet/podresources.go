package nodelet

import (
	"context"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/podresources"
)

// startPodResources serves the pod-resources API on
// <root-dir>/pod-resources/kubelet.sock, as upstream does in every mode.
func (n *Nodelet) startPodResources(ctx context.Context, goRun func(func())) error {
	s, err := podresources.New(podresources.Config{
		Path:       filepath.Join(n.opts.RootDir, podresources.Dir, podresources.Socket),
		Pods:       podResourcesPods{n},
		Devices:    n.devices,
		Registerer: metrics.Kubelet,
	})
	if err != nil {
		return err
	}
	goRun(func() {
		if err := s.Run(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Pod-resources API stopped")
		}
	})
	return nil
}

// podResourcesPods gives the pod-resources API the pods upstream's does:
// the active ones (admitted, not finished) for List, any admitted one for Get.
type podResourcesPods struct{ n *Nodelet }

func (p podResourcesPods) ActivePods() []*v1.Pod { return p.n.livePods() }

func (p podResourcesPods) PodByName(namespace, name string) (*v1.Pod, bool) {
	return p.n.pods.GetByName(namespace, name)
}
