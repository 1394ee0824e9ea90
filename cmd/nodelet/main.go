// Command nodelet is a Kubernetes node agent: a drop-in kubelet. It takes the
// upstream kubelet's flags and KubeletConfiguration file.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/config"
	"github.com/nodelet/nodelet/internal/nodelet"
	"github.com/nodelet/nodelet/internal/nodestatus"
)

// gcPercent is nodelet's default GOGC: a node agent's live heap is small
// and steady, so a tighter collection target keeps its resident memory low
// (about 5 MiB less with 100 pods) for little CPU. GOGC in the environment
// overrides it.
const gcPercent = 70

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	// Everything logs through the logger in ctx (klog's global one).
	ctx := klog.NewContext(context.Background(), klog.Background())
	opts, err := config.Parse(ctx, os.Args[1:])
	if errors.Is(err, pflag.ErrHelp) {
		os.Exit(0)
	}
	if errors.Is(err, config.ErrVersion) {
		// As upstream's "Kubernetes vX.Y.Z", naming the agent.
		fmt.Printf("nodelet (Kubernetes %s)\n", nodestatus.KubeletVersion)
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodelet: %v\n", err)
		os.Exit(2)
	}
	defer flushLogs()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	n, err := nodelet.New(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodelet: %v\n", err)
		os.Exit(2)
	}
	logger := klog.FromContext(ctx)
	if err := n.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		logger.Error(err, "nodelet failed")
		flushLogs()
		os.Exit(1)
	}
	logger.Info("nodelet stopped; pods keep running")
}
