package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	internalapi "k8s.io/cri-api/pkg/apis"
)

// Runner runs one probe or hook action against a container.
type Runner struct {
	Runtime internalapi.RuntimeService
}

// Target is where a probe goes: the container and its pod.
type Target struct {
	Pod         *v1.Pod
	Container   *v1.Container
	ContainerID string
	PodIP       string
}

// Exec runs cmd in the container with a timeout; a non-zero exit code or a
// timeout is an error.
func (r *Runner) Exec(ctx context.Context, t Target, cmd []string, timeout time.Duration) (string, error) {
	stdout, stderr, err := r.Runtime.ExecSync(ctx, t.ContainerID, cmd, timeout)
	out := strings.TrimSpace(string(stdout) + string(stderr))
	if err != nil {
		return out, fmt.Errorf("command %q: %w", strings.Join(cmd, " "), err)
	}
	return out, nil
}

// HTTPGet does the probe's GET; 200-399 is success. Redirects are followed
// on the same host (up to 10); a redirect elsewhere counts as success, as
// upstream.
func (r *Runner) HTTPGet(ctx context.Context, t Target, h *v1.HTTPGetAction, timeout time.Duration) (string, error) {
	addr, err := t.address(h.Host, h.Port)
	if err != nil {
		return "", err
	}
	u := &url.URL{Scheme: strings.ToLower(string(h.Scheme)), Host: addr, Path: h.Path}
	if u.Scheme == "" {
		u.Scheme = "http"
	}
	if i := strings.Index(h.Path, "?"); i >= 0 {
		u.Path, u.RawQuery = h.Path[:i], h.Path[i+1:]
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("User-Agent", "kube-probe/1.37")
	req.Header.Set("Accept", "*/*")
	for _, hd := range h.HTTPHeaders {
		if strings.EqualFold(hd.Name, "Host") {
			req.Host = hd.Value
			continue
		}
		req.Header.Add(hd.Name, hd.Value)
	}
	client := &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // probes do not verify, as upstream
			DisableKeepAlives: true,
			Proxy:             nil,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Hostname() != via[0].URL.Hostname() {
				return http.ErrUseLastResponse
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		// A redirect to another host is not followed: a success, with a
		// warning, as upstream.
		return "", Warning(fmt.Sprintf("Probe terminated redirects, Response body: %s", body))
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return "", nil
	}
	return "", fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
}

// maxBodyBytes is how much of an HTTP probe's answer is read, as upstream.
const maxBodyBytes = 10 * 1024

// Warning is a probe that passed with something to say (an HTTP redirect to
// another host it did not follow): a success, reported as a ProbeWarning
// event.
type Warning string

func (w Warning) Error() string { return string(w) }

// TCP connects to the port.
func (r *Runner) TCP(ctx context.Context, t Target, s *v1.TCPSocketAction, timeout time.Duration) (string, error) {
	addr, err := t.address(s.Host, s.Port)
	if err != nil {
		return "", err
	}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	return "", conn.Close()
}

// GRPC calls the standard health checking service.
func (r *Runner) GRPC(ctx context.Context, t Target, g *v1.GRPCAction, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := grpc.NewClient(net.JoinHostPort(t.PodIP, strconv.Itoa(int(g.Port))),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent("kube-probe/1.37"))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return "", fmt.Errorf("gRPC health check: %w", err)
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		return "", fmt.Errorf("service unhealthy (responded with %q)", resp.Status)
	}
	return "", nil
}

// address is host:port of a probe or hook: the pod IP unless a host is
// given, and the port by number or by the container's port name.
func (t Target) address(host string, port intstr.IntOrString) (string, error) {
	p, err := resolvePort(port, t.Container)
	if err != nil {
		return "", err
	}
	if host == "" {
		host = t.PodIP
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}

// resolvePort turns a numbered or named port into a number.
func resolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal < 1 || p.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port number: %d", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("couldn't find port %q in %s", p.StrVal, c.Name)
}

// Probe runs a probe's handler once.
func (r *Runner) Probe(ctx context.Context, t Target, p *v1.Probe) (string, error) {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	switch {
	case p.Exec != nil:
		return r.Exec(ctx, t, p.Exec.Command, timeout)
	case p.HTTPGet != nil:
		return r.HTTPGet(ctx, t, p.HTTPGet, timeout)
	case p.TCPSocket != nil:
		return r.TCP(ctx, t, p.TCPSocket, timeout)
	case p.GRPC != nil:
		return r.GRPC(ctx, t, p.GRPC, timeout)
	}
	return "", errors.New("probe has no handler")
}

// Hook runs a lifecycle handler (postStart, preStop) with a time limit.
func (r *Runner) Hook(ctx context.Context, t Target, h *v1.LifecycleHandler, timeout time.Duration) (string, error) {
	switch {
	case h.Exec != nil:
		return r.Exec(ctx, t, h.Exec.Command, timeout)
	case h.HTTPGet != nil:
		out, err := r.HTTPGet(ctx, t, h.HTTPGet, timeout)
		if errors.As(err, new(Warning)) {
			err = nil // a redirect elsewhere: the hook ran
		}
		return out, err
	case h.Sleep != nil:
		d := min(time.Duration(h.Sleep.Seconds)*time.Second, timeout)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(d):
			return "", nil
		}
	case h.TCPSocket != nil:
		return "", nil // deprecated and a no-op upstream
	}
	return "", errors.New("lifecycle handler has no action")
}
