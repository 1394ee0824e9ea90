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
	"k8s.io/apimachinery/pkg/types"
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
// EventList), for nodelet describe; GET /nodelet/pods and
// /nodelet/pods/{ns}/{pod}, the details of every pod or one; and GET
// /nodelet/info.
func (s *Server) localHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", s.Handler())
	mux.HandleFunc("GET /nodelet/events/{ns}/{pod}", func(w http.ResponseWriter, r *http.Request) {
		pod, ok := s.pods.PodByName(r.PathValue("ns"), r.PathValue("pod"))
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
	mux.HandleFunc("GET /nodelet/pods", func(w http.ResponseWriter, _ *http.Request) {
		list := PodDetailsList{Items: []PodDetails{}}
		for _, p := range s.pods.Pods() {
			list.Items = append(list.Items, s.details(p))
		}
		writeJSON(w, list)
	})
	mux.HandleFunc("GET /nodelet/pods/{ns}/{pod}", func(w http.ResponseWriter, r *http.Request) {
		pod, ok := s.pods.PodByName(r.PathValue("ns"), r.PathValue("pod"))
		if !ok {
			http.Error(w, fmt.Sprintf("pod %q does not exist", r.PathValue("pod")), http.StatusNotFound)
			return
		}
		writeJSON(w, s.details(pod))
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

// Pod sources, as `nodelet pods` shows them.
const (
	SourceFile       = "file"       // a static pod
	SourceAPI        = "api"        // a pod of the API server
	SourceCheckpoint = "checkpoint" // an API pod run from the offline checkpoint, not yet confirmed by the API server
)

// PodSource is where pod comes from by its annotations: file or api.
func PodSource(pod *v1.Pod) string {
	if s := pod.Annotations["kubernetes.io/config.source"]; s != "" && s != "api" {
		return s
	}
	return SourceAPI
}

// PodDetailsList is GET /nodelet/pods.
type PodDetailsList struct {
	Items []PodDetails `json:"items"`
}

// PodDetails is GET /nodelet/pods/{ns}/{pod}: what nodelet knows of a pod
// that its status does not say.
type PodDetails struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	// Source is file, api or checkpoint.
	Source string `json:"source"`
	// BackOff are the containers waiting out a restart back-off.
	BackOff []ContainerBackOff `json:"backOff,omitempty"`
	// Volumes are the pod's volumes in its spec's order.
	Volumes []VolumeState `json:"volumes,omitempty"`
}

// ContainerBackOff is a container's restart back-off: its length, and
// when the container may start again.
type ContainerBackOff struct {
	Container string          `json:"container"`
	Delay     metav1.Duration `json:"delay"`
	Until     metav1.Time     `json:"until"`
}

// Volume states.
const (
	VolumeReady   = "Ready"   // set up (mounted, written)
	VolumeFailed  = "Failed"  // its last set-up failed
	VolumePending = "Pending" // not tried yet (an earlier volume failed, or the pod is not started)
)

// VolumeState is a pod volume's state on the node.
type VolumeState struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	State string `json:"state"`
	// Path is the volume's host path once set up.
	Path    string       `json:"path,omitempty"`
	SetUpAt *metav1.Time `json:"setUpAt,omitempty"`
	// Error is the last set-up's error when State is Failed.
	Error string       `json:"error,omitempty"`
	ErrAt *metav1.Time `json:"errorAt,omitempty"`
}
