// Command deviceplugin is a sample device plugin speaking the real
// deviceplugin v1beta1 API, for the e2e tests (as upstream's
// test/images/sample-device-plugin): it serves -devices fake devices of
// -resource, each a regular file and a character device node (a copy of
// /dev/null) under -dev-dir, registers with the kubelet's socket in
// -plugin-dir and registers again whenever that socket is created anew (a
// kubelet restart). Allocate gives each device's file as a mount at
// /fake/<id>, its node as /dev/fake-<id>, FAKE_DEVICES=<ids>, an
// annotation, and, with -cdi-dir, a CDI name whose spec it writes there.
// A device is unhealthy while <dev-dir>/<id>.unhealthy exists. With
// -prestart, PreStartContainer calls are logged to <dev-dir>/prestart.log;
// with -prefer, GetPreferredAllocation prefers the highest IDs.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	resource, devDir, cdiDir string
	ids                      []string
	prestart, prefer         bool
	changed                  chan struct{}
	mu                       sync.Mutex
	sent                     map[*chan struct{}]bool
}

func (p *plugin) devices() []*pluginapi.Device {
	var out []*pluginapi.Device
	for _, id := range p.ids {
		h := pluginapi.Healthy
		if _, err := os.Stat(filepath.Join(p.devDir, id+".unhealthy")); err == nil {
			h = pluginapi.Unhealthy
		}
		out = append(out, &pluginapi.Device{ID: id, Health: h})
	}
	return out
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{PreStartRequired: p.prestart, GetPreferredAllocationAvailable: p.prefer}, nil
}

// ListAndWatch sends the devices, and again each time the health files
// change.
func (p *plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	ch := make(chan struct{}, 1)
	p.mu.Lock()
	p.sent[&ch] = true
	p.mu.Unlock()
	defer func() { p.mu.Lock(); delete(p.sent, &ch); p.mu.Unlock() }()
	for {
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices()}); err != nil {
			return err
		}
		select {
		case <-ch:
		case <-s.Context().Done():
			return nil
		}
	}
}

func (p *plugin) notify() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ch := range p.sent {
		select {
		case *ch <- struct{}{}:
		default:
		}
	}
}

func (p *plugin) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	out := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range r.ContainerRequests {
		ids := slices.Clone(cr.MustIncludeDeviceIDs)
		avail := slices.Clone(cr.AvailableDeviceIDs)
		slices.Sort(avail)
		slices.Reverse(avail)
		for _, id := range avail {
			if len(ids) < int(cr.AllocationSize) && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return out, nil
}

func (p *plugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for _, cr := range r.ContainerRequests {
		resp := &pluginapi.ContainerAllocateResponse{
			Envs:        map[string]string{"FAKE_DEVICES": strings.Join(cr.DevicesIds, ",")},
			Annotations: map[string]string{"example.com/devices": strings.Join(cr.DevicesIds, ",")},
		}
		for _, id := range cr.DevicesIds {
			if !slices.Contains(p.ids, id) {
				return nil, fmt.Errorf("invalid allocation request with non-existing device %s", id)
			}
			if _, err := os.Stat(filepath.Join(p.devDir, id+".unhealthy")); err == nil {
				return nil, fmt.Errorf("invalid allocation request with unhealthy device: %s", id)
			}
			resp.Mounts = append(resp.Mounts, &pluginapi.Mount{ContainerPath: "/fake/" + id, HostPath: filepath.Join(p.devDir, id), ReadOnly: true})
			resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{ContainerPath: "/dev/fake-" + id, HostPath: filepath.Join(p.devDir, id+".node"), Permissions: "rw"})
			if p.cdiDir != "" {
				resp.CdiDevices = append(resp.CdiDevices, &pluginapi.CDIDevice{Name: p.resource + "=" + id})
			}
		}
		log.Printf("Allocate %v", cr.DevicesIds)
		out.ContainerResponses = append(out.ContainerResponses, resp)
	}
	return out, nil
}

func (p *plugin) PreStartContainer(_ context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	f, err := os.OpenFile(filepath.Join(p.devDir, "prestart.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	_, err = fmt.Fprintln(f, strings.Join(r.DevicesIds, ","))
	return &pluginapi.PreStartContainerResponse{}, err
}

// writeCDISpec writes a CDI spec giving each device an env variable.
func (p *plugin) writeCDISpec() error {
	kind := p.resource
	var devs []map[string]any
	for _, id := range p.ids {
		devs = append(devs, map[string]any{"name": id, "containerEdits": map[string]any{"env": []string{"CDI_DEVICE_" + strings.ReplaceAll(id, "-", "_") + "=1"}}})
	}
	b, err := json.Marshal(map[string]any{"cdiVersion": "0.5.0", "kind": kind, "devices": devs})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(p.cdiDir, strings.ReplaceAll(kind, "/", "_")+".json"), b, 0o644)
}

func register(kubeletSock, endpoint, resource string) error {
	conn, err := grpc.NewClient("passthrough:///"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", kubeletSock)
		}))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: endpoint, ResourceName: resource,
	})
	return err
}

func main() {
	resource := flag.String("resource", "example.com/resource", "the resource name")
	pluginDir := flag.String("plugin-dir", pluginapi.DevicePluginPath, "the kubelet's device plugins folder")
	devDir := flag.String("dev-dir", "", "where the fake devices are made (required)")
	n := flag.Int("devices", 2, "how many devices")
	prestart := flag.Bool("prestart", false, "ask for PreStartContainer")
	prefer := flag.Bool("prefer", false, "offer GetPreferredAllocation (the highest IDs)")
	cdiDir := flag.String("cdi-dir", "", "write a CDI spec here and give CDI names")
	flag.Parse()
	if *devDir == "" {
		log.Fatal("-dev-dir is required")
	}
	p := &plugin{resource: *resource, devDir: *devDir, cdiDir: *cdiDir, prestart: *prestart, prefer: *prefer, sent: map[*chan struct{}]bool{}}
	for i := 1; i <= *n; i++ {
		id := fmt.Sprintf("Dev-%d", i)
		p.ids = append(p.ids, id)
		if err := os.WriteFile(filepath.Join(*devDir, id), []byte(id+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
		node := filepath.Join(*devDir, id+".node")
		_ = os.Remove(node)
		if err := unix.Mknod(node, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			log.Fatal(err)
		}
	}
	if *cdiDir != "" {
		if err := p.writeCDISpec(); err != nil {
			log.Fatal(err)
		}
	}
	endpoint := fmt.Sprintf("sample-%d.sock", os.Getpid())
	sock := filepath.Join(*pluginDir, endpoint)
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(l) }()

	w, err := fsnotify.NewWatcher()
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range []string{*pluginDir, *devDir} {
		if err := w.Add(d); err != nil {
			log.Fatal(err)
		}
	}
	kubeletSock := filepath.Join(*pluginDir, "kubelet.sock")
	reg := func() {
		for i := 0; ; i++ {
			err := register(kubeletSock, endpoint, *resource)
			if err == nil {
				log.Printf("registered %s as %s", *resource, endpoint)
				return
			}
			if i == 50 {
				log.Fatalf("register: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	reg()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	for {
		select {
		case e := <-w.Events:
			switch {
			case e.Name == kubeletSock && e.Has(fsnotify.Create):
				log.Printf("kubelet socket created again")
				reg()
			case e.Name == sock && e.Has(fsnotify.Remove):
				// The kubelet cleared the folder at its start: serve again.
				log.Printf("own socket removed; serving again")
				srv.Stop()
				l, err = net.Listen("unix", sock)
				if err != nil {
					log.Fatal(err)
				}
				srv = grpc.NewServer()
				pluginapi.RegisterDevicePluginServer(srv, p)
				go func() { _ = srv.Serve(l) }()
			case strings.HasSuffix(e.Name, ".unhealthy"):
				p.notify()
			}
		case err := <-w.Errors:
			log.Printf("watch: %v", err)
		case <-sig:
			srv.Stop()
			_ = os.Remove(sock)
			return
		}
	}
}
