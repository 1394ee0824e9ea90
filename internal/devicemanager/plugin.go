package devicemanager

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// plugin is the connection to one registered device plugin.
type plugin struct {
	resource string
	path     string
	conn     *grpc.ClientConn
	client   pluginapi.DevicePluginClient
	options  *pluginapi.DevicePluginOptions
	cancel   context.CancelFunc
	ctx      context.Context
}

// connect dials the plugin's socket and asks for its options, as upstream
// does before accepting the registration.
func connect(ctx context.Context, resourceName, path string) (*plugin, error) {
	conn, err := grpc.NewClient("passthrough:///"+path, connectOptions(path)...)
	if err != nil {
		return nil, fmt.Errorf("failed to dial device plugin: %w", err)
	}
	client := pluginapi.NewDevicePluginClient(conn)
	octx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	opts, err := client.GetDevicePluginOptions(octx, &pluginapi.Empty{}, grpc.WaitForReady(true))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("failed to get device plugin options: %w", err)
	}
	pctx, pcancel := context.WithCancel(ctx)
	return &plugin{resource: resourceName, path: path, conn: conn, client: client, options: opts, ctx: pctx, cancel: pcancel}, nil
}

// listAndWatch calls update with each list of devices the plugin sends
// until its stream ends (the plugin went away, or close).
func (p *plugin) listAndWatch(_ context.Context, update func([]*pluginapi.Device)) error {
	stream, err := p.client.ListAndWatch(p.ctx, &pluginapi.Empty{})
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		update(resp.Devices)
	}
}

func (p *plugin) close() {
	p.cancel()
	_ = p.conn.Close()
}
