package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/proxy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// streamOptions are the exec/attach query parameters the API server sends
// the kubelet (input, output, error, tty = "1"; v1.Exec*Param).
type streamOptions struct {
	stdin, stdout, stderr, tty bool
}

func formBool(r *http.Request, name string) bool {
	v := r.FormValue(name)
	return v == "1" || strings.EqualFold(v, "true")
}

func parseStreamOptions(r *http.Request) (streamOptions, error) {
	o := streamOptions{
		stdin: formBool(r, v1.ExecStdinParam), stdout: formBool(r, v1.ExecStdoutParam),
		stderr: formBool(r, v1.ExecStderrParam), tty: formBool(r, v1.ExecTTYParam),
	}
	if o.tty && o.stderr {
		// A terminal merges stderr into stdout, as upstream.
		o.stderr = false
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, fmt.Errorf("you must specify at least 1 of stdin, stdout, stderr")
	}
	return o, nil
}

// streamPod resolves {ns}/{pod}[/{uid}] of a streaming path to the pod,
// answering 404 itself when there is none.
func (s *Server) streamPod(w http.ResponseWriter, r *http.Request) (*v1.Pod, bool) {
	name, uid := r.PathValue("pod"), types.UID(r.PathValue("uid"))
	pod, found := s.pods.PodByName(r.PathValue("ns"), name)
	if !found || (uid != "" && pod.UID != uid) {
		http.Error(w, fmt.Sprintf("pod %q does not exist", name), http.StatusNotFound)
		return nil, false
	}
	return pod, true
}

// containerTarget resolves the stream options and the running container
// of an exec or attach request, answering the error itself when it fails.
func (s *Server) containerTarget(w http.ResponseWriter, r *http.Request) (streamOptions, string, bool) {
	opts, err := parseStreamOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return opts, "", false
	}
	pod, ok := s.streamPod(w, r)
	if !ok {
		return opts, "", false
	}
	id, err := s.runningContainerID(r.Context(), pod, r.PathValue("container"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return opts, "", false
	}
	return opts, id, true
}

// handleExec serves /exec/{ns}/{pod}[/{uid}]/{container}?command=...: asks
// the runtime for a streaming URL and proxies the upgraded connection.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	cmd := r.URL.Query()[v1.ExecCommandParam]
	if len(cmd) == 0 {
		http.Error(w, "no command given", http.StatusBadRequest)
		return
	}
	opts, id, ok := s.containerTarget(w, r)
	if !ok {
		return
	}
	resp, err := s.runtime.Exec(r.Context(), &runtimeapi.ExecRequest{
		ContainerId: id, Cmd: cmd, Tty: opts.tty, Stdin: opts.stdin, Stdout: opts.stdout, Stderr: opts.stderr,
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.proxyStream(w, r, resp.Url)
}

// handleAttach serves /attach/{ns}/{pod}[/{uid}]/{container}.
func (s *Server) handleAttach(w http.ResponseWriter, r *http.Request) {
	opts, id, ok := s.containerTarget(w, r)
	if !ok {
		return
	}
	resp, err := s.runtime.Attach(r.Context(), &runtimeapi.AttachRequest{
		ContainerId: id, Tty: opts.tty, Stdin: opts.stdin, Stdout: opts.stdout, Stderr: opts.stderr,
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.proxyStream(w, r, resp.Url)
}

// handlePortForward serves /portForward/{ns}/{pod}[/{uid}]. SPDY clients
// name the ports per stream; WebSocket clients in the "port" parameters.
func (s *Server) handlePortForward(w http.ResponseWriter, r *http.Request) {
	pod, ok := s.streamPod(w, r)
	if !ok {
		return
	}
	var ports []int32
	for _, list := range r.URL.Query()["port"] {
		for _, p := range strings.Split(list, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
			if err != nil || n == 0 {
				http.Error(w, fmt.Sprintf("invalid port %q", p), http.StatusBadRequest)
				return
			}
			ports = append(ports, int32(n))
		}
	}
	sandbox, err := s.sandboxID(r.Context(), pod)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	resp, err := s.runtime.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: sandbox, Port: ports})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.proxyStream(w, r, resp.Url)
}

// handleRun serves POST /run/{ns}/{pod}[/{uid}]/{container}?cmd=...: runs
// the command to completion and returns its combined output.
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	pod, ok := s.streamPod(w, r)
	if !ok {
		return
	}
	cmd := strings.Fields(r.FormValue("cmd"))
	if len(cmd) == 0 {
		http.Error(w, "no cmd given", http.StatusBadRequest)
		return
	}
	id, err := s.runningContainerID(r.Context(), pod, r.PathValue("container"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	stdout, stderr, err := s.runtime.ExecSync(r.Context(), id, cmd, 0)
	if err != nil && len(stdout)+len(stderr) == 0 {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(append(stdout, stderr...))
}

// proxyStream hands the (upgraded) connection to the runtime's streaming
// server at rawURL, as upstream does.
func (s *Server) proxyStream(w http.ResponseWriter, r *http.Request, rawURL string) {
	u, err := url.Parse(rawURL)
	if err != nil {
		http.Error(w, fmt.Sprintf("bad streaming URL from the runtime: %v", err), http.StatusInternalServerError)
		return
	}
	if u.Scheme == "" {
		// Some runtimes answer with a path only: relative to their server.
		u.Scheme, u.Host = "http", r.Host
	}
	h := proxy.NewUpgradeAwareHandler(u, nil, false, true, responder{})
	h.ServeHTTP(w, r)
}

type responder struct{}

func (responder) Error(w http.ResponseWriter, r *http.Request, err error) {
	klog.FromContext(r.Context()).Error(err, "Error while proxying a stream to the runtime", "path", r.URL.Path)
	http.Error(w, err.Error(), http.StatusInternalServerError)
}
