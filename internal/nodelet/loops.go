package nodelet

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	internalapi "k8s.io/cri-api/pkg/apis"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/nodelet/nodelet/internal/apiclient"
	"github.com/nodelet/nodelet/internal/csi"
	"github.com/nodelet/nodelet/internal/healthz"
	"github.com/nodelet/nodelet/internal/lifecycle"
	"github.com/nodelet/nodelet/internal/logs"
	"github.com/nodelet/nodelet/internal/memtrim"
	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/pluginwatcher"
	"github.com/nodelet/nodelet/internal/podresources"
	"github.com/nodelet/nodelet/internal/server"
	"github.com/nodelet/nodelet/internal/source/file"
	"github.com/nodelet/nodelet/internal/source/manifesturl"
	"github.com/nodelet/nodelet/internal/syncloop"
)

// earlyLoops run before the runtime is reached: the health endpoint (its
// failure is fatal: the supervisor watches it) and the client
// certificate's rotation (bootstrapping in the background).
func (n *Nodelet) earlyLoops() []lifecycle.Loop {
	var loops []lifecycle.Loop
	cfg := &n.opts.Config
	if *cfg.HealthzPort > 0 {
		addr := net.JoinHostPort(cfg.HealthzBindAddress, strconv.Itoa(int(*cfg.HealthzPort)))
		loops = append(loops, lifecycle.Loop{Name: "healthz", Fatal: true, Run: func(ctx context.Context) error {
			return healthz.Serve(ctx, addr, n.healthHandler())
		}})
	}
	if n.certs != nil {
		loops = append(loops, lifecycle.Loop{Name: "client-certificate", Run: n.certs.Run})
	}
	return loops
}

// sideLoops are the loops beside the pod workers, in the order they start
// (and the reverse of the order they stop in): one row each.
func (n *Nodelet) sideLoops(ctx context.Context, rs internalapi.RuntimeService) ([]lifecycle.Loop, error) {
	cfg := &n.opts.Config
	metrics.NodeName.WithLabelValues(n.opts.NodeName).Set(1)
	metrics.SetRunning(n.pleg.RunningCounts)
	maxSize, err := resource.ParseQuantity(cfg.ContainerLogMaxSize)
	if err != nil {
		return nil, fmt.Errorf("containerLogMaxSize: %w", err)
	}
	rotator, err := logs.New(logs.Config{Runtime: rs, Clock: n.clock, MaxSize: maxSize.Value(), MaxFiles: int(*cfg.ContainerLogMaxFiles),
		MonitorInterval: cfg.ContainerLogMonitorInterval.Duration, MaxWorkers: int(*cfg.ContainerLogMaxWorkers)})
	if err != nil {
		return nil, err
	}
	csiHandler := &csi.Handler{Drivers: n.csiDrivers}
	var csiNode *csi.APINodeInfo
	if n.client != nil {
		csiNode = &csi.APINodeInfo{Client: n.client, NodeName: n.opts.NodeName, Registered: n.nodeStatus.Registered()}
		csiHandler.NodeInfo = csiNode
	}
	handlers := map[string]pluginwatcher.Handler{registerapi.CSIPlugin: csiHandler}
	if n.draPlugins != nil {
		handlers[registerapi.DRAPlugin] = n.draPlugins
	}
	watcher, err := pluginwatcher.New(pluginwatcher.Config{Dir: n.root.PluginsRegistry(), Clock: n.clock, Handlers: handlers})
	if err != nil {
		return nil, err
	}
	prCfg := podresources.Config{Path: n.root.PodResourcesSocket(), Pods: podResourcesPods{n},
		Devices: n.devices, CPUs: n.cpus, Memory: n.mems, Registerer: n.registerer}
	if n.dra != nil {
		prCfg.DynamicResources = n.dra
	}
	podResources, err := podresources.New(prCfg)
	if err != nil {
		return nil, err
	}
	ready := []<-chan struct{}{n.sourcesReady.C()}
	if n.nodeStatus != nil {
		ready = append(ready, n.nodeStatus.Registered())
	}
	trim, err := memtrim.New(memtrim.Config{Clock: n.clock, Ready: ready})
	if err != nil {
		return nil, err
	}
	loops := []lifecycle.Loop{
		{Name: "container-logs", Run: rotator.Run},
		{Name: "plugin-registration", Run: watcher.Run},
		{Name: "csi-expansion", Run: n.csiVolumes.RunExpansion},
		{Name: "device-plugins", Run: n.devices.Run},
		{Name: "cpu-manager", Run: n.cpus.Run},
		{Name: "memory-manager", Run: n.mems.Run},
		{Name: "pod-resources", Run: podResources.Run},
	}
	if csiNode != nil {
		loops = append(loops, lifecycle.Loop{Name: "csinode", Run: csiNode.RunCSINode})
	}
	if n.dra != nil {
		loops = append(loops, lifecycle.Loop{Name: "dra-plugins", Run: n.draPlugins.Run},
			lifecycle.Loop{Name: "dra-claims", Run: n.dra.Run})
	}
	api, err := n.apiServerLoops(rs)
	if err != nil {
		return nil, err
	}
	loops = append(loops, api...)
	if n.offline != nil {
		// Started once Run restored the checkpoint's pods.
		loops = append(loops, lifecycle.Loop{Name: "offline-checkpoint", Run: n.offline.Run})
	}
	if n.podCerts != nil {
		loops = append(loops, lifecycle.Loop{Name: "pod-certificates", Run: n.podCerts.Run})
	}
	if n.client != nil {
		loops = append(loops,
			lifecycle.Loop{Name: "node-status", Run: n.nodeStatus.Run},
			lifecycle.Loop{Name: "status", Run: n.syncer.Run},
			lifecycle.Loop{Name: "services", Run: n.services.Run})
	}
	loops = append(loops,
		lifecycle.Loop{Name: "pleg", Run: n.pleg.Run},
		lifecycle.Loop{Name: "eviction", Run: n.eviction.Run},
		lifecycle.Loop{Name: "image-gc", Run: n.imageGC.Run},
		lifecycle.Loop{Name: "container-gc", Run: n.containerGC.Run},
		lifecycle.Loop{Name: "memtrim", Run: trim.Run})
	if n.shutdown != nil {
		loops = append(loops, lifecycle.Loop{Name: "shutdown", Run: n.shutdown.Run})
	}
	return loops, nil
}

// apiServerLoops serve the kubelet API (on its port, with its serving
// certificate) and the local API (nodelet's CLI), as configured.
func (n *Nodelet) apiServerLoops(rs internalapi.RuntimeService) ([]lifecycle.Loop, error) {
	if !n.opts.EnableServer && !n.opts.LocalAPI {
		return nil, nil
	}
	var loops []lifecycle.Loop
	cfg := &n.opts.Config
	var serving *apiclient.Serving
	if n.opts.EnableServer && cfg.ServerTLSBootstrap && n.certs != nil {
		var err error
		if serving, err = n.certs.NewServing(apiclient.ServingConfig{CertDir: n.opts.CertDir, Addresses: n.nodeAddresses,
			TLSCertFile: cfg.TLSCertFile, TLSPrivateKeyFile: cfg.TLSPrivateKeyFile}); err != nil {
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
		loops = append(loops, lifecycle.Loop{Name: "serving-certificate", Run: serving.Run})
	}
	hostname, _ := os.Hostname()
	var ips []net.IP
	for _, s := range n.hostIPs {
		if ip := net.ParseIP(s); ip != nil {
			ips = append(ips, ip)
		}
	}
	sc := server.Config{NodeName: n.opts.NodeName, Kubelet: cfg, Flags: n.opts.Flags, CertDir: n.opts.CertDir, Hostname: hostname, NodeIPs: ips,
		LogDir: "/var/log", Client: n.client, Pods: n.view, Runtime: rs, PodRuntime: n.runtime, Relisted: n.pleg.RunningPods,
		Stats: n.stats, Events: n.events.ForPod, VolumeStates: n.volumes.States, Clock: n.clock}
	if serving != nil {
		sc.ServingCertificate = serving.Current
	}
	if n.offline != nil {
		sc.Restored = n.offline.Restored
	}
	srv, err := server.New(sc)
	if err != nil {
		return nil, fmt.Errorf("kubelet API: %w", err)
	}
	if n.opts.EnableServer {
		loops = append(loops, lifecycle.Loop{Name: "kubelet-api", Run: srv.Run})
	}
	if n.opts.LocalAPI {
		loops = append(loops, lifecycle.Loop{Name: "local-api", Run: func(ctx context.Context) error {
			return srv.RunLocal(ctx, n.root.LocalAPISocket())
		}})
	}
	return loops, nil
}

// startSources starts the pod sources, whose updates go to the main loop
// through in; a source not configured counts as seen.
func (n *Nodelet) startSources(ctx context.Context, in *syncloop.Inputs) error {
	cfg := &n.opts.Config
	var loops []lifecycle.Loop
	if cfg.StaticPodPath != "" {
		src, err := file.New(file.Config{Dir: cfg.StaticPodPath, NodeName: n.opts.NodeName, Period: cfg.FileCheckFrequency.Duration, Clock: n.clock})
		if err != nil {
			return err
		}
		loops = append(loops, lifecycle.Loop{Name: "static-pods", Run: src.Run})
		in.File = src.Updates()
	} else {
		n.main.Seen(syncloop.SourceFile)
	}
	if cfg.StaticPodURL != "" {
		src, err := manifesturl.New(manifesturl.Config{URL: cfg.StaticPodURL, Header: manifestURLHeader(cfg.StaticPodURLHeader),
			NodeName: n.opts.NodeName, Period: cfg.HTTPCheckFrequency.Duration, Clock: n.clock})
		if err != nil {
			return err
		}
		loops = append(loops, lifecycle.Loop{Name: "static-pods-url", Run: src.Run})
		in.HTTP = src.Updates()
	} else {
		n.main.Seen(syncloop.SourceHTTP)
	}
	if n.apiSource != nil {
		loops = append(loops, lifecycle.Loop{Name: "api-pods", Run: n.apiSource.Run})
		in.API, in.Mirrors = n.apiSource.Events(), n.apiSource.Mirrors()
	} else {
		n.main.Seen(syncloop.SourceAPI)
	}
	return n.loops.Start(ctx, loops...)
}

// manifestURLHeader is staticPodURLHeader as upstream sends it: every
// value of a name, in order.
func manifestURLHeader(m map[string][]string) http.Header {
	if len(m) == 0 {
		return nil
	}
	h := http.Header{}
	for name, values := range m {
		for _, v := range values {
			h.Add(name, v)
		}
	}
	return h
}

// nodeAddresses are the addresses the node reports (its IPs, its name).
func (n *Nodelet) nodeAddresses() []v1.NodeAddress {
	var out []v1.NodeAddress
	for _, ip := range n.hostIPs {
		out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	return append(out, v1.NodeAddress{Type: v1.NodeHostName, Address: n.opts.NodeName})
}
