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
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/server"
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

// getJSON reads path's JSON answer into v.
func (c *client) getJSON(ctx context.Context, path string, v any) error {
	resp, err := c.get(ctx, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}

// podPath is prefix + the pod's namespace/name, escaped.
func podPath(prefix string, pod *v1.Pod) string {
	return prefix + url.PathEscape(pod.Namespace) + "/" + url.PathEscape(pod.Name)
}

// events are the pod's recent events nodelet kept.
func (c *client) events(ctx context.Context, pod *v1.Pod) ([]v1.Event, error) {
	var list v1.EventList
	err := c.getJSON(ctx, podPath("/nodelet/events/", pod), &list)
	return list.Items, err
}

// pods are the pods the node runs (the kubelet API's /pods).
func (c *client) pods(ctx context.Context) ([]v1.Pod, error) {
	var list v1.PodList
	if err := c.getJSON(ctx, "/pods", &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// runningPods are the pods with a running container or sandbox in the
// last relist (the kubelet API's /runningpods/), also pods the node no
// longer wants but has not stopped yet.
func (c *client) runningPods(ctx context.Context) ([]v1.Pod, error) {
	var list v1.PodList
	if err := c.getJSON(ctx, "/runningpods/", &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// details is what the local API tells of pod beyond its status.
func (c *client) details(ctx context.Context, pod *v1.Pod) (server.PodDetails, error) {
	var d server.PodDetails
	err := c.getJSON(ctx, podPath("/nodelet/pods/", pod), &d)
	return d, err
}

// sources are the pods' sources (file, api, checkpoint) by UID.
func (c *client) sources(ctx context.Context) (map[types.UID]string, error) {
	var list server.PodDetailsList
	if err := c.getJSON(ctx, "/nodelet/pods", &list); err != nil {
		return nil, err
	}
	out := make(map[types.UID]string, len(list.Items))
	for _, d := range list.Items {
		out[d.UID] = d.Source
	}
	return out, nil
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
