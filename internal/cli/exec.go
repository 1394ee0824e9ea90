package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// execCommand is `nodelet exec POD [-c C] [-i] [-t] -- CMD...`: through the
// kubelet API's /exec, as kubectl exec reaches it through the API server;
// the exit code is the command's.
func execCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("exec", pflag.ContinueOnError)
	var c common
	c.add(fs)
	container := fs.StringP("container", "c", "", "The container (default: the pod's only or default one).")
	c.addNamespace(fs)
	stdin := fs.BoolP("stdin", "i", false, "Pass stdin to the command.")
	tty := fs.BoolP("tty", "t", false, "Give the command a terminal.")
	if code, stop := parse(fs, args, "Run a command in a container.\n\nUsage:\n  nodelet exec POD [-c CONTAINER] [-i] [-t] -- COMMAND [ARGS...]", stderr); stop {
		return code
	}
	if fs.NArg() < 2 {
		return fail(stderr, errors.New("nodelet exec takes a pod and a command: nodelet exec POD -- COMMAND [ARGS...]"))
	}
	cl, pod, err := c.pod(ctx, fs.Arg(0))
	if err != nil {
		return fail(stderr, err)
	}
	name := *container
	if name == "" {
		name = defaultContainer(pod, stderr)
	}
	q := url.Values{"command": fs.Args()[1:], "output": {"1"}}
	if *tty {
		q.Set("tty", "1")
	} else {
		q.Set("error", "1")
	}
	if *stdin {
		q.Set("input", "1")
	}
	u := &url.URL{Scheme: "http", Host: "nodelet", Path: "/exec/" + pod.Namespace + "/" + pod.Name + "/" + name, RawQuery: q.Encode()}
	up := &unixUpgrader{socket: cl.socket}
	ex, err := remotecommand.NewSPDYExecutorForTransports(up, up, http.MethodPost, u)
	if err != nil {
		return fail(stderr, err)
	}
	opts := remotecommand.StreamOptions{Stdout: stdout, Tty: *tty}
	if !*tty {
		opts.Stderr = stderr
	}
	if *stdin {
		opts.Stdin = os.Stdin
	}
	err = ex.StreamWithContext(ctx, opts)
	var exitErr utilexec.CodeExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exitErr):
		return exitErr.Code
	default:
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
}
