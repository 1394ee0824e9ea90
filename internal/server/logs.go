package server

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crilogs "k8s.io/cri-client/pkg/logs"
)

// handleContainerLogs serves /containerLogs/{ns}/{pod}/{container} with the
// PodLogOptions query parameters (follow, tailLines, sinceSeconds,
// sinceTime, timestamps, previous, limitBytes, stream), reading the CRI log
// file of the container and following it across rotations.
func (s *Server) handleContainerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	query := r.URL.Query()
	// "tail" is the old name of tailLines; "all" means no limit.
	if tail := query.Get("tail"); tail != "" {
		query["tailLines"] = []string{tail}
		if tail == "all" {
			delete(query, "tailLines")
		}
	}
	opts, err := decodeLogOptions(query)
	if err != nil {
		http.Error(w, `{"message": "Unable to decode query."}`, http.StatusBadRequest)
		return
	}
	if err := validateLogOptions(opts); err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	pod, ok := s.pods.PodByName(ns, name)
	if !ok {
		http.Error(w, fmt.Sprintf("pod %q does not exist", name), http.StatusNotFound)
		return
	}
	if !hasContainer(pod, container) {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", container, name), http.StatusNotFound)
		return
	}
	id, path, err := s.containerLog(r.Context(), pod, container, opts.Previous)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fw := &flushWriter{w: w}
	if f, ok := w.(http.Flusher); ok {
		fw.f = f
	}
	w.Header().Set("Content-Type", "text/plain")
	stdout, stderr := io.Writer(fw), io.Writer(fw)
	if opts.Stream != nil {
		switch *opts.Stream {
		case v1.LogStreamStdout:
			stderr = io.Discard
		case v1.LogStreamStderr:
			stdout = io.Discard
		}
	}
	err = crilogs.ReadLogs(r.Context(), path, id, criLogOptions(opts, time.Now()), s.runtime, stdout, stderr)
	fw.close()
	if err != nil && !fw.wrote {
		http.Error(w, err.Error(), http.StatusBadRequest)
	}
}

// criLogOptions converts the API's options as upstream does: sinceTime wins
// over sinceSeconds when it is later.
func criLogOptions(o *v1.PodLogOptions, now time.Time) *crilogs.LogOptions {
	out := &crilogs.LogOptions{TailLines: o.TailLines, LimitBytes: o.LimitBytes, Follow: o.Follow, Timestamp: o.Timestamps}
	if o.SinceSeconds != nil {
		out.Since = now.Add(-time.Duration(*o.SinceSeconds) * time.Second)
	}
	if o.SinceTime != nil && o.SinceTime.After(out.Since) {
		out.Since = o.SinceTime.Time
	}
	return out
}

// validateLogOptions applies the API's validation of PodLogOptions.
func validateLogOptions(o *v1.PodLogOptions) error {
	switch {
	case o.TailLines != nil && *o.TailLines < 0:
		return fmt.Errorf("tailLines: must be greater than or equal to 0")
	case o.LimitBytes != nil && *o.LimitBytes < 1:
		return fmt.Errorf("limitBytes: must be greater than 0")
	case o.SinceSeconds != nil && o.SinceTime != nil:
		return fmt.Errorf("at most one of sinceTime or sinceSeconds may be specified")
	case o.SinceSeconds != nil && *o.SinceSeconds < 1:
		return fmt.Errorf("sinceSeconds: must be greater than 0")
	case o.Stream != nil && *o.Stream != v1.LogStreamAll && *o.Stream != v1.LogStreamStdout && *o.Stream != v1.LogStreamStderr:
		return fmt.Errorf("stream: unsupported value %q", *o.Stream)
	case o.Stream != nil && *o.Stream != v1.LogStreamAll && o.TailLines != nil:
		return fmt.Errorf("tailLines: may not be specified when stream is not All")
	}
	return nil
}

func hasContainer(pod *v1.Pod, name string) bool {
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range list {
			if c.Name == name {
				return true
			}
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// flushWriter sends what was written within flushDelay: followed logs
// arrive promptly without a flush (an HTTP chunk through every proxy) per
// line. close must be called before the handler returns.
type flushWriter struct {
	mu      sync.Mutex
	w       io.Writer
	f       http.Flusher
	pending bool
	closed  bool
	wrote   bool
}

const flushDelay = 10 * time.Millisecond

func (f *flushWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, io.ErrClosedPipe
	}
	n, err := f.w.Write(p)
	f.wrote = f.wrote || n > 0
	if f.f != nil && !f.pending {
		f.pending = true
		time.AfterFunc(flushDelay, f.flush)
	}
	return n, err
}

func (f *flushWriter) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending = false
	if !f.closed {
		f.f.Flush()
	}
}

// close flushes what is left and stops later flushes.
func (f *flushWriter) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed && f.f != nil && f.pending {
		f.f.Flush()
	}
	f.closed = true
}

// decodeLogOptions reads v1.PodLogOptions from query parameters, as the API
// server encodes them for the kubelet.
func decodeLogOptions(q url.Values) (*v1.PodLogOptions, error) {
	o := &v1.PodLogOptions{Container: q.Get("container")}
	var err error
	boolean := func(name string, dst *bool) {
		if v := q.Get(name); v != "" && err == nil {
			*dst, err = strconv.ParseBool(v)
		}
	}
	integer := func(name string) *int64 {
		v := q.Get(name)
		if v == "" || err != nil {
			return nil
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil {
			err = perr
			return nil
		}
		return &n
	}
	boolean("follow", &o.Follow)
	boolean("previous", &o.Previous)
	boolean("timestamps", &o.Timestamps)
	boolean("insecureSkipTLSVerifyBackend", &o.InsecureSkipTLSVerifyBackend)
	o.SinceSeconds = integer("sinceSeconds")
	o.TailLines = integer("tailLines")
	o.LimitBytes = integer("limitBytes")
	if v := q.Get("sinceTime"); v != "" && err == nil {
		t, perr := time.Parse(time.RFC3339, v)
		if perr != nil {
			return nil, perr
		}
		o.SinceTime = &metav1.Time{Time: t}
	}
	if v := q.Get("stream"); v != "" {
		o.Stream = &v
	}
	return o, err
}
