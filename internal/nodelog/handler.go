package nodelog

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// queryTimeout bounds a query's journalctl runs and file copies, as
// upstream's.
const queryTimeout = 30 * time.Second

// Config is what the handler needs.
type Config struct {
	// LogDir is the node's log directory (/var/log): served at /logs/ and
	// where files and services without journal entries are looked up.
	LogDir string
	// Journalctl is the journalctl command (default "journalctl" on PATH).
	Journalctl string
}

// Handler serves /logs/ (mounted with the /logs/ prefix stripped): node log
// queries, and the log directory's files otherwise.
type Handler struct {
	cfg   Config
	files http.Handler
}

// New returns the handler for cfg.
func New(cfg Config) (*Handler, error) {
	if cfg.LogDir == "" {
		return nil, errors.New("nodelog: LogDir is required")
	}
	if cfg.Journalctl == "" {
		cfg.Journalctl = "journalctl"
	}
	return &Handler{cfg: cfg, files: http.FileServer(http.Dir(cfg.LogDir))}, nil
}

// ServeHTTP answers as upstream's kubelet does with enableSystemLogQuery:
// 400 for a query it cannot parse, 406 for one it refuses (a path beside a
// query, an invalid service, file or option), the journal's text for
// services, and the file server for a file or a plain path.
func (h *Handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	q, errs := Parse(req.URL.Query())
	if len(errs) > 0 {
		http.Error(w, errs.ToAggregate().Error(), http.StatusBadRequest)
		return
	}
	if q != nil {
		if req.URL.Path != "/" && req.URL.Path != "" {
			http.Error(w, "path not allowed in query mode", http.StatusNotAcceptable)
			return
		}
		if errs := q.Validate(h.cfg.LogDir); len(errs) > 0 {
			http.Error(w, errs.ToAggregate().Error(), http.StatusNotAcceptable)
			return
		}
		if len(q.Services) > 0 {
			h.serveServices(w, req, q)
			return
		}
		// One file (validated): served from the log directory.
		req.URL.Path = filepath.ToSlash(q.Files[0])
	}
	h.files.ServeHTTP(w, req)
}

// serveServices writes the services' journal (or log files) as text,
// gzipped when the client asks for exactly that.
func (h *Handler) serveServices(w http.ResponseWriter, req *http.Request, q *Query) {
	var out io.Writer = w
	w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
	if req.Header.Get("Accept-Encoding") == "gzip" {
		w.Header().Set("Content-Encoding", "gzip")
		gz, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
		if err != nil {
			fmt.Fprintf(w, "\nfailed to get gzip writer: %v\n", err)
			return
		}
		defer func() { _ = gz.Close() }()
		out = gz
	}
	ctx, cancel := context.WithTimeout(req.Context(), queryTimeout)
	defer cancel()
	h.copyQuery(ctx, out, q)
}

// copyQuery splits the services between those journald knows and those
// that may log to a file, and copies both, as upstream.
func (h *Handler) copyQuery(ctx context.Context, w io.Writer, q *Query) {
	var units string
	if out, err := exec.CommandContext(ctx, h.cfg.Journalctl, "--field", "_SYSTEMD_UNIT").CombinedOutput(); err == nil {
		units = string(out)
	}
	var journal, files []string
	for _, s := range q.Services {
		if units != "" && journalKnows(units, s) {
			journal = append(journal, s)
		} else {
			files = append(files, s)
		}
	}
	if len(journal) > 0 {
		cmd := exec.CommandContext(ctx, h.cfg.Journalctl, q.JournalArgs(journal)...)
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Run(); err != nil {
			var exit *exec.ExitError
			if !errors.As(err, &exit) && (q.Boot == nil || *q.Boot == 0) {
				fmt.Fprintf(w, "\nerror: journal output not available\n")
			}
		}
	}
	if len(files) == 0 {
		return
	}
	if q.Options != (Options{}) {
		fmt.Fprintf(w, "\noptions present and query resolved to log files for %v\ntry without specifying options\n", files)
		return
	}
	for _, s := range files {
		if ctx.Err() != nil {
			fmt.Fprintf(w, "\ncontext error: %v\n", ctx.Err())
			return
		}
		h.copyServiceFile(ctx, w, s)
	}
}

// copyServiceFile copies the first of a service's candidate log files that
// exists under the log directory.
func (h *Handler) copyServiceFile(ctx context.Context, w io.Writer, service string) {
	var err error
	for _, name := range logFileCandidates(service) {
		if err = copyFile(ctx, w, h.cfg.LogDir, name); !errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	switch {
	case errors.Is(err, os.ErrNotExist):
		fmt.Fprintf(w, "\nlog not found for %s\n", service)
	case err != nil:
		fmt.Fprintf(w, "\nerror getting log for %s: %v\n", service, err)
	}
}

// copyFile copies dir/name, never leaving dir; a directory counts as
// missing.
func copyFile(ctx context.Context, w io.Writer, dir, name string) error {
	f, err := os.OpenInRoot(dir, name)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return os.ErrNotExist
	}
	_, err = io.Copy(w, ctxReader{ctx, f})
	return err
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
