package nodelet

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/logs"
	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/server"
	"github.com/nodelet/nodelet/internal/stats"
)

// startSideLoops starts the loops beside the pod workers that need the
// runtime: container log rotation and the kubelet API.
func (n *Nodelet) startSideLoops(ctx context.Context, rs internalapi.RuntimeService, is internalapi.ImageManagerService, goRun func(func())) error {
	cfg := &n.opts.Config
	metrics.NodeName.WithLabelValues(n.opts.NodeName).Set(1)
	metrics.SetRunning(n.runningCounts)

	maxSize, err := resource.ParseQuantity(cfg.ContainerLogMaxSize)
	if err != nil {
		return fmt.Errorf("containerLogMaxSize: %w", err)
	}
	rotator, err := logs.New(logs.Config{
		Runtime:         rs,
		Clock:           n.clock,
		MaxSize:         maxSize.Value(),
		MaxFiles:        int(*cfg.ContainerLogMaxFiles),
		MonitorInterval: cfg.ContainerLogMonitorInterval.Duration,
		MaxWorkers:      int(*cfg.ContainerLogMaxWorkers),
	})
	if err != nil {
		return err
	}
	goRun(func() { rotator.Run(ctx) })

	if !n.opts.EnableServer && !n.opts.LocalAPI {
		return nil
	}
	hostname, _ := os.Hostname()
	var ips []net.IP
	for _, s := range n.hostIPs {
		if ip := net.ParseIP(s); ip != nil {
			ips = append(ips, ip)
		}
	}
	var serving func() *tls.Certificate
	if n.opts.EnableServer {
		var err error
		if serving, err = n.servingCertificate(); err != nil {
			return fmt.Errorf("serving certificate: %w", err)
		}
	}
	srv, err := server.New(server.Config{
		ServingCertificate: serving,
		NodeName:           n.opts.NodeName,
		Kubelet:            cfg,
		CertDir:            n.opts.CertDir,
		Hostname:           hostname,
		NodeIPs:            ips,
		LogDir:             "/var/log",
		Client:             n.client,
		Host:               apiHost{n},
		Runtime:            rs,
		Stats:              n.stats,
		Events:             n.events.ForPod,
		Details:            apiHost{n}.podDetails,
	})
	if err != nil {
		return fmt.Errorf("kubelet API: %w", err)
	}
	if n.opts.EnableServer {
		goRun(func() {
			if err := srv.Run(ctx); err != nil {
				klog.FromContext(ctx).Error(err, "Kubelet API stopped")
			}
		})
	}
	if n.opts.LocalAPI {
		goRun(func() {
			if err := srv.RunLocal(ctx, filepath.Join(n.opts.RootDir, server.LocalSocket)); err != nil {
				klog.FromContext(ctx).Error(err, "Local API stopped")
			}
		})
	}
	return nil
}

// runningCounts are kubelet_running_pods and kubelet_running_containers
// from the last relist.
func (n *Nodelet) runningCounts() (int, map[string]int) {
	pods, _ := n.pleg.RunningPods()
	ctrs := map[string]int{}
	count := 0
	for _, p := range pods {
		for _, s := range p.Sandboxes {
			if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				count++
				break
			}
		}
		for _, c := range p.Containers {
			ctrs[metrics.ContainerStateLabel(c.State)]++
		}
	}
	return count, ctrs
}

// newStats is the /stats/summary and /metrics/resource provider; the
// /metrics/resource scrapes log to ctx's logger.
func (n *Nodelet) newStats(ctx context.Context, rs internalapi.RuntimeService, is internalapi.ImageManagerService) (*stats.Provider, error) {
	podsDir := filepath.Join(n.opts.RootDir, "pods")
	podsCgroup := ""
	if *n.opts.Config.CgroupsPerQOS {
		podsCgroup = n.cgroups.PodsCgroup()
	}
	return stats.New(stats.Config{
		NodeName:             n.opts.NodeName,
		RootDir:              n.opts.RootDir,
		PodLogsDir:           n.opts.Config.PodLogsDir,
		Runtime:              rs,
		Images:               is,
		Clock:                n.clock,
		Machine:              n.machine,
		Logger:               klog.FromContext(ctx),
		VolumeStatsAggPeriod: n.opts.Config.VolumeStatsAggPeriod.Duration,
		PodsCgroup:           podsCgroup,
		DriverVolume: func(ctx context.Context, pod *v1.Pod, v *v1.Volume) (statsv1alpha1.VolumeStats, bool) {
			u, ok := n.csiVolumes.VolumeStats(ctx, pod.UID, v.Name)
			if !ok {
				return statsv1alpha1.VolumeStats{}, false
			}
			return u.SummaryStats(v.Name), true
		},
		Pods: func() []stats.PodInfo {
			var out []stats.PodInfo
			for _, p := range n.pods.Admitted("") {
				out = append(out, stats.PodInfo{Pod: p, VolumeDir: filepath.Join(podsDir, string(p.UID), "volumes")})
			}
			return out
		},
	})
}
