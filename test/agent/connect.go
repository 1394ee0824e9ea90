package agent

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
)

// Connect is what a benchmark of the agents talks to: an admin client of
// the stack's control plane (env's KUBECONFIG, with the given QPS and
// burst) and containerd's CRI runtime service.
func Connect(env map[string]string, qps float32, burst int) (kubernetes.Interface, internalapi.RuntimeService, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", env["KUBECONFIG"])
	if err != nil {
		return nil, nil, err
	}
	rc.QPS, rc.Burst = qps, burst
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rt, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(env["CONTAINER_RUNTIME_ENDPOINT"]).
		WithConnectionTimeout(5 * time.Second).WithTracerProvider(nil).Build(ctx)
	if err != nil {
		return nil, nil, err
	}
	return client, rt, nil
}
