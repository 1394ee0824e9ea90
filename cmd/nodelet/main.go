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
	opts, err := config.Parse(os.Args[1:])
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
	defer klog.Flush()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	n, err := nodelet.New(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodelet: %v\n", err)
		os.Exit(2)
	}
	if err := n.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		klog.ErrorS(err, "nodelet failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.InfoS("nodelet stopped; pods keep running")
}
