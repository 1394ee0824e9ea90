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

	"github.com/nodelet/nodelet/internal/cli"
	"github.com/nodelet/nodelet/internal/config"
	"github.com/nodelet/nodelet/internal/nodelet"
	"github.com/nodelet/nodelet/internal/version"
)

// gcPercent is nodelet's default GOGC: a node agent's live heap is small
// (about 12 MiB with 100 pods) and steady, so a tighter collection target
// keeps its resident memory low for little CPU: with 100 pods, 100 -> 70
// saved about 5 MiB, 70 -> 50 about 2.4 MiB more (anonymous 21.4 -> 19.0
// MiB), the burst's agent CPU within its noise. GOGC in the environment
// overrides it.
const gcPercent = 50

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if len(os.Args) > 1 && os.Args[1] == "version" {
		os.Exit(versionCommand(os.Args[2:]))
	}
	// The operator's commands (nodelet pods, logs, ...) talk to a running
	// nodelet through its local API.
	if len(os.Args) > 1 {
		if cmd, ok := cli.Commands[os.Args[1]]; ok {
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			code := cmd(ctx, os.Args[2:], os.Stdout, os.Stderr)
			stop()
			os.Exit(code)
		}
	}
	// Everything logs through the logger in ctx (klog's global one).
	ctx := klog.NewContext(context.Background(), klog.Background())
	opts, err := config.Parse(ctx, os.Args[1:])
	if errors.Is(err, pflag.ErrHelp) {
		os.Exit(0)
	}
	switch {
	case errors.Is(err, config.ErrVersion):
		// Exactly upstream's line: kubeadm's preflight parses it.
		fmt.Println(version.Short())
		os.Exit(0)
	case errors.Is(err, config.ErrVersionRaw):
		fmt.Println(version.Get().Raw())
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodelet: %v\n", err)
		os.Exit(2)
	}
	defer flushLogs()
	config.LogEffective(ctx, &opts.Config)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	n, err := nodelet.New(ctx, nodelet.Config{Options: opts})
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

// versionCommand is `nodelet version [-o json|yaml]`: the kubelet version
// nodelet implements and nodelet's own build.
func versionCommand(args []string) int {
	fs := pflag.NewFlagSet("version", pflag.ContinueOnError)
	output := fs.StringP("output", "o", "", "One of 'yaml' or 'json'.")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Print the kubelet version nodelet implements and nodelet's build.\n\nUsage:\n  nodelet version [-o json|yaml]\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "nodelet version: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "nodelet version: unexpected arguments %v\n", fs.Args())
		return 2
	}
	out, err := version.Get().Format(*output)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodelet version: %v\n", err)
		return 2
	}
	fmt.Print(out)
	return 0
}
