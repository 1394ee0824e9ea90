package healthz

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// Check is one named health check; nil means healthy.
type Check struct {
	Name string
	Fn   func() error
	// Info, when set, is shown after "ok" in /healthz?verbose (a state
	// worth seeing that is not a failure).
	Info func() string
}

// Handler serves /healthz over checks.
func Handler(checks ...Check) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		failed := false
		for _, c := range checks {
			if err := c.Fn(); err != nil {
				failed = true
				fmt.Fprintf(&b, "[-]%s failed: %v\n", c.Name, err)
			} else if c.Info != nil {
				fmt.Fprintf(&b, "[+]%s ok: %s\n", c.Name, c.Info())
			} else {
				fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if failed {
			w.WriteHeader(http.StatusInternalServerError)
			b.WriteString("healthz check failed\n")
			_, _ = w.Write([]byte(b.String()))
			return
		}
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			b.WriteString("healthz check passed\n")
			_, _ = w.Write([]byte(b.String()))
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

// Serve serves h on addr until ctx is done.
func Serve(ctx context.Context, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("healthz: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	klog.FromContext(ctx).Info("Serving healthz", "address", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
