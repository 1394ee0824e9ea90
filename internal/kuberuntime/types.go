package kuberuntime

import (
	"sort"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/kubecontainer"
)

func sortSandboxes(s []*runtimeapi.PodSandboxStatus) {
	sort.SliceStable(s, func(i, j int) bool { return s[i].CreatedAt > s[j].CreatedAt })
}

func sortContainers(c []*kubecontainer.ContainerStatus) {
	sort.SliceStable(c, func(i, j int) bool {
		if !c[i].CreatedAt.Equal(c[j].CreatedAt) {
			return c[i].CreatedAt.After(c[j].CreatedAt)
		}
		return c[i].Attempt > c[j].Attempt
	})
}
