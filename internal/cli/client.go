package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// client talks to nodelet's local API on a unix socket.
type client struct {
	socket string
	http   *http.Client
}

func newClient(socket string) *client {
	return &client{socket: socket, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}}
}

// errNotRunning says nodelet does not answer on its socket.
type errNotRunning struct {
	socket string
	err    error
}

func (e errNotRunning) Error() string {
	return fmt.Sprintf("nodelet is not running (no local API at %s: %v)", e.socket, e.err)
}

// get requests path (with query) and returns the response for the caller
// to read and close; a status other than 200 is an error with the body.
func (c *client) get(ctx context.Context, path string, query url.Values) (*http.Response, error) {
	u := "http://nodelet" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, errNotRunning{c.socket, err}
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, fmt.Errorf("%s", strings.TrimSpace(string(b)))
	}
	return resp, nil
}

// pods are the pods the node runs (the kubelet API's /pods).
func (c *client) pods(ctx context.Context) ([]v1.Pod, error) {
	resp, err := c.get(ctx, "/pods", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("reading the pods: %w", err)
	}
	return list.Items, nil
}

// findPod is the pod named name (a static pod also by its manifest's name,
// without the node's suffix), in namespace when it is not empty.
func findPod(pods []v1.Pod, namespace, name string) (*v1.Pod, error) {
	if ns, n, ok := strings.Cut(name, "/"); ok && namespace == "" {
		namespace, name = ns, n
	}
	var exact, static []*v1.Pod
	for i := range pods {
		p := &pods[i]
		if namespace != "" && p.Namespace != namespace {
			continue
		}
		switch {
		case p.Name == name:
			exact = append(exact, p)
		case p.Spec.NodeName != "" && p.Name == name+"-"+p.Spec.NodeName:
			static = append(static, p)
		}
	}
	for _, found := range [][]*v1.Pod{exact, static} {
		switch len(found) {
		case 0:
			continue
		case 1:
			return found[0], nil
		default:
			var names []string
			for _, p := range found {
				names = append(names, p.Namespace+"/"+p.Name)
			}
			return nil, fmt.Errorf("pod %q is in several namespaces (%s): say which with -n", name, strings.Join(names, ", "))
		}
	}
	if namespace != "" {
		return nil, fmt.Errorf("pod %q not found in namespace %q", name, namespace)
	}
	return nil, fmt.Errorf("pod %q not found", name)
}
