package cli

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// portForwardCommand is `nodelet port-forward POD [LOCAL:]REMOTE...`:
// local ports on 127.0.0.1 forwarded to the pod's ports through the
// kubelet API's /portForward, until interrupted.
func portForwardCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("port-forward", pflag.ContinueOnError)
	var c common
	c.add(fs)
	c.addNamespace(fs)
	address := fs.StringSlice("address", []string{"127.0.0.1"}, "Addresses to listen on.")
	if code, stop := parse(fs, args, "Forward local ports to a pod's ports.\n\nUsage:\n  nodelet port-forward POD [LOCAL_PORT:]REMOTE_PORT...", stderr); stop {
		return code
	}
	if fs.NArg() < 2 {
		return fail(stderr, errors.New("nodelet port-forward takes a pod and at least one port"))
	}
	cl, pod, err := c.pod(ctx, fs.Arg(0))
	if err != nil {
		return fail(stderr, err)
	}
	up := &unixUpgrader{socket: cl.socket}
	u := &url.URL{Scheme: "http", Host: "nodelet", Path: "/portForward/" + pod.Namespace + "/" + pod.Name}
	dialer := spdy.NewDialer(up, &http.Client{Transport: up}, http.MethodPost, u)
	fw, err := portforward.NewOnAddressesWithContext(ctx, dialer, *address, fs.Args()[1:], nil, stdout, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	if err := fw.ForwardPorts(); err != nil {
		return fail(stderr, err)
	}
	return 0
}
