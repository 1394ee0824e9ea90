package stats

import (
	"context"
	"fmt"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// rawContainer is a running container and what the runtime said of it.
type rawContainer struct {
	meta  *runtimeapi.Container
	stats *runtimeapi.ContainerStats
}

// rawPod is a sandbox and its running containers. stats is nil when the
// runtime does not implement ListPodSandboxStats.
type rawPod struct {
	sandbox    *runtimeapi.PodSandbox
	stats      *runtimeapi.PodSandboxStats
	containers []rawContainer
}

// listRuntime asks the runtime for the sandboxes, running containers and
// their stats.
func (p *Provider) listRuntime(ctx context.Context) ([]*rawPod, error) {
	sandboxes, err := p.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	containers, err := p.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	sandboxByID := make(map[string]*runtimeapi.PodSandbox)
	for _, s := range currentSandboxes(sandboxes) {
		sandboxByID[s.Id] = s
	}
	running := runningContainers(containers)

	if p.useSandboxStats() {
		stats, err := p.cfg.Runtime.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{})
		if err == nil {
			return podsFromSandboxStats(stats, sandboxByID, running), nil
		}
		if status.Code(err) == codes.Unimplemented {
			klog.FromContext(ctx).V(2).Info("The runtime does not implement ListPodSandboxStats; using ListContainerStats")
			p.noSandboxStats.Store(true)
		} else {
			// containerd 1.6 fails the whole call when one sandbox has no
			// cgroup parent ("cgroupPath is empty"): use the containers'
			// stats, and try again later.
			klog.FromContext(ctx).V(2).Info("ListPodSandboxStats failed; using ListContainerStats", "retryIn", sandboxStatsRetry, "err", err)
			p.sandboxStatsRetryAt.Store(p.clock.Now().Add(sandboxStatsRetry).UnixNano())
		}
	}
	stats, err := p.cfg.Runtime.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	if err != nil {
		return nil, fmt.Errorf("list container stats: %w", err)
	}
	return podsFromContainerStats(stats, sandboxByID, running), nil
}

// sandboxStatsRetry is how long ListPodSandboxStats is not asked again
// after it failed.
const sandboxStatsRetry = 5 * time.Minute

func (p *Provider) useSandboxStats() bool {
	if p.noSandboxStats.Load() {
		return false
	}
	return p.clock.Now().UnixNano() >= p.sandboxStatsRetryAt.Load()
}

func podsFromSandboxStats(stats []*runtimeapi.PodSandboxStats, sandboxByID map[string]*runtimeapi.PodSandbox, running map[string]*runtimeapi.Container) []*rawPod {
	var pods []*rawPod
	seen := make(map[string]bool)
	for _, st := range stats {
		if st == nil || st.Attributes == nil || seen[st.Attributes.Id] {
			continue
		}
		sb, ok := sandboxByID[st.Attributes.Id]
		if !ok {
			continue
		}
		seen[sb.Id] = true
		rp := &rawPod{sandbox: sb, stats: st}
		for _, cs := range st.GetLinux().GetContainers() {
			if cs == nil || cs.Attributes == nil {
				continue
			}
			if c, ok := running[cs.Attributes.Id]; ok && c.PodSandboxId == sb.Id {
				rp.containers = append(rp.containers, rawContainer{meta: c, stats: cs})
			}
		}
		pods = append(pods, rp)
	}
	sortPods(pods)
	return pods
}

// podsFromContainerStats groups container stats by sandbox; as upstream, a
// sandbox without running containers is not reported then.
func podsFromContainerStats(stats []*runtimeapi.ContainerStats, sandboxByID map[string]*runtimeapi.PodSandbox, running map[string]*runtimeapi.Container) []*rawPod {
	byID := make(map[string]*rawPod)
	var pods []*rawPod
	seen := make(map[string]bool)
	for _, cs := range stats {
		if cs == nil || cs.Attributes == nil || seen[cs.Attributes.Id] {
			continue
		}
		c, ok := running[cs.Attributes.Id]
		if !ok {
			continue
		}
		sb, ok := sandboxByID[c.PodSandboxId]
		if !ok {
			continue
		}
		seen[c.Id] = true
		rp := byID[sb.Id]
		if rp == nil {
			rp = &rawPod{sandbox: sb}
			byID[sb.Id] = rp
			pods = append(pods, rp)
		}
		rp.containers = append(rp.containers, rawContainer{meta: c, stats: cs})
	}
	sortPods(pods)
	return pods
}

func sortPods(pods []*rawPod) {
	sort.Slice(pods, func(i, j int) bool {
		a, b := pods[i].sandbox.GetMetadata(), pods[j].sandbox.GetMetadata()
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		if a.GetName() != b.GetName() {
			return a.GetName() < b.GetName()
		}
		return pods[i].sandbox.CreatedAt > pods[j].sandbox.CreatedAt
	})
	for _, p := range pods {
		sort.Slice(p.containers, func(i, j int) bool {
			return p.containers[i].meta.GetMetadata().GetName() < p.containers[j].meta.GetMetadata().GetName()
		})
	}
}

// currentSandboxes keeps, as upstream, every sandbox of a pod (by namespace
// and name) when it is the only one; otherwise the ready ones, or the newest
// if none is ready.
func currentSandboxes(sandboxes []*runtimeapi.PodSandbox) []*runtimeapi.PodSandbox {
	type ref struct{ ns, name string }
	groups := make(map[ref][]*runtimeapi.PodSandbox)
	var order []ref
	for _, s := range sandboxes {
		if s == nil || s.Metadata == nil {
			continue
		}
		r := ref{s.Metadata.Namespace, s.Metadata.Name}
		if _, ok := groups[r]; !ok {
			order = append(order, r)
		}
		groups[r] = append(groups[r], s)
	}
	var out []*runtimeapi.PodSandbox
	for _, r := range order {
		g := groups[r]
		if len(g) == 1 {
			out = append(out, g[0])
			continue
		}
		var newest *runtimeapi.PodSandbox
		found := false
		for _, s := range g {
			if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				out = append(out, s)
				found = true
			}
			if newest == nil || s.CreatedAt > newest.CreatedAt {
				newest = s
			}
		}
		if !found {
			out = append(out, newest)
		}
	}
	return out
}

// runningContainers maps the running containers by ID. Should a sandbox run
// two containers of one name (a restart racing), only the newest is kept:
// the metrics would otherwise repeat a label set.
func runningContainers(containers []*runtimeapi.Container) map[string]*runtimeapi.Container {
	type ref struct{ sandbox, name string }
	newest := make(map[ref]*runtimeapi.Container)
	for _, c := range containers {
		if c == nil || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING || c.Metadata == nil {
			continue
		}
		r := ref{c.PodSandboxId, c.Metadata.Name}
		if o, ok := newest[r]; !ok || c.CreatedAt > o.CreatedAt {
			newest[r] = c
		}
	}
	out := make(map[string]*runtimeapi.Container, len(newest))
	for _, c := range newest {
		out[c.Id] = c
	}
	return out
}

func uint64Value(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	return ptr(v.Value)
}
