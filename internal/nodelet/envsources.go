package nodelet

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/kuberuntime"
	"github.com/nodelet/nodelet/internal/nodestatus"
	"github.com/nodelet/nodelet/internal/serviceenv"
)

// addEnvSources adds to the runtime manager's cfg what container
// environments refer to in cluster mode: ConfigMaps and Secrets (the cached
// API getter), the Services (an informer, started by Run) and
// RuntimeClasses. Standalone, there are none.
func (n *Nodelet) addEnvSources(cfg *kuberuntime.Config) error {
	if n.client == nil {
		return nil
	}
	src, err := serviceenv.New(serviceenv.Config{Client: n.client})
	if err != nil {
		return err
	}
	n.serviceSource = src
	cfg.Objects, cfg.ServiceEnv, cfg.RuntimeHandlers = n.objects, src.Env, n.runtimeHandler
	if g, ok := n.objects.(*checkpoint.Getter); ok {
		cfg.ServiceEnv = g.ServiceEnv // offline: the environment last computed
	}
	return nil
}

// allocatable is the node's allocatable: from the Node in cluster mode,
// else computed from the machine once.
func (n *Nodelet) allocatable() v1.ResourceList {
	if n.nodeStatus != nil {
		if node := n.nodeStatus.Node(); node != nil && len(node.Status.Allocatable) > 0 {
			return node.Status.Allocatable
		}
	}
	n.machineOnce.Do(func() {
		n.machineAlloc = nodestatus.MachineAllocatable(&n.opts.Config, n.machine)
	})
	return n.machineAlloc
}

// runtimeHandler resolves a RuntimeClass to its handler through the API
// (a pod's RuntimeClass rarely changes: no cache beyond the client's).
func (n *Nodelet) runtimeHandler(ctx context.Context, name string) (string, error) {
	rc, err := n.client.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("RuntimeClass %q not found", name)
	}
	if err != nil {
		return "", fmt.Errorf("RuntimeClass %q: %w", name, err)
	}
	return rc.Handler, nil
}
