package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// LocalSocket is the local API's socket in the root dir.
const LocalSocket = "nodelet.sock"

// RunLocal serves the kubelet API without TLS on the unix socket path
// (mode 0600: root only) for the node's local administrator (the nodelet
// CLI) until ctx is done: no authentication or authorization, the file's
// mode is the gate.
func (s *Server) RunLocal(ctx context.Context, path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	// Connecting needs write permission on the socket: under the usual
	// umask (022) nobody else has it from the start; 0600 makes it so
	// whatever the umask.
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return err
	}
	srv := &http.Server{
		Handler:           instrument("local", s.localHandler()),
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	klog.FromContext(ctx).Info("Serving the local API", "socket", path)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		<-errc
		_ = os.Remove(path)
		return nil
	case err := <-errc:
		return err
	}
}

// localHandler is the kubelet API plus what only the local API serves:
// GET /nodelet/events/{ns}/{pod}, the pod's recent events (a v1
// EventList), for nodelet describe, and GET /nodelet/info.
func (s *Server) localHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", s.Handler())
	mux.HandleFunc("GET /nodelet/events/{ns}/{pod}", func(w http.ResponseWriter, r *http.Request) {
		pod, ok := s.host.PodByName(r.PathValue("ns"), r.PathValue("pod"))
		if !ok {
			http.Error(w, fmt.Sprintf("pod %q does not exist", r.PathValue("pod")), http.StatusNotFound)
			return
		}
		list := &v1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"}}
		if s.cfg.Events != nil {
			list.Items = s.cfg.Events(pod.UID)
		}
		writeJSON(w, list)
	})
	mux.HandleFunc("GET /nodelet/info", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, LocalInfo{NodeName: s.cfg.NodeName, StaticPodPath: s.cfg.Kubelet.StaticPodPath})
	})
	return mux
}

// LocalInfo is GET /nodelet/info: what the CLI needs to know of the node.
type LocalInfo struct {
	NodeName      string `json:"nodeName"`
	StaticPodPath string `json:"staticPodPath"`
}
