package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"golang.org/x/term"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// execCommand is `nodelet exec POD [-c C] [-i] [-t] -- CMD...`: through the
// kubelet API's /exec, as kubectl exec reaches it through the API server;
// the exit code is the command's.
func execCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return streamCommand(ctx, "exec", args, stdout, stderr)
}

// attachCommand is `nodelet attach POD [-c C] [-i] [-t]`: the container's
// own stdin, stdout and stderr through the kubelet API's /attach, as
// kubectl attach.
func attachCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return streamCommand(ctx, "attach", args, stdout, stderr)
}

// streamCommand runs exec or attach.
func streamCommand(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet(verb, pflag.ContinueOnError)
	var c common
	c.add(fs)
	container := fs.StringP("container", "c", "", "The container (default: the pod's only or default one).")
	c.addNamespace(fs)
	stdin := fs.BoolP("stdin", "i", false, "Pass stdin to the container.")
	tty := fs.BoolP("tty", "t", false, "Stdin is a terminal (the local one is put in raw mode and its size followed).")
	usage := "Run a command in a container.\n\nUsage:\n  nodelet exec POD [-c CONTAINER] [-i] [-t] -- COMMAND [ARGS...]"
	if verb == "attach" {
		usage = "Attach to a running container's own stdin, stdout and stderr.\n\nUsage:\n  nodelet attach POD [-c CONTAINER] [-i] [-t]"
	}
	if code, stop := parse(fs, args, usage, stderr); stop {
		return code
	}
	switch {
	case verb == "exec" && fs.NArg() < 2:
		return fail(stderr, errors.New("nodelet exec takes a pod and a command: nodelet exec POD -- COMMAND [ARGS...]"))
	case verb == "attach" && fs.NArg() != 1:
		return fail(stderr, fmt.Errorf("nodelet attach takes one pod, got %v", fs.Args()))
	}
	cl, pod, err := c.pod(ctx, fs.Arg(0))
	if err != nil {
		return fail(stderr, err)
	}
	name := *container
	if name == "" {
		name = defaultContainer(pod, stderr)
	}
	q := url.Values{"output": {"1"}}
	if verb == "exec" {
		q["command"] = fs.Args()[1:]
	}
	if *tty {
		q.Set("tty", "1")
	} else {
		q.Set("error", "1")
	}
	if *stdin {
		q.Set("input", "1")
	}
	u := &url.URL{Scheme: "http", Host: "nodelet", Path: "/" + verb + "/" + pod.Namespace + "/" + pod.Name + "/" + name, RawQuery: q.Encode()}
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
	if *tty && *stdin {
		restore, sizes, err := localTerminal(ctx, int(os.Stdin.Fd()))
		if err != nil {
			fmt.Fprintf(stderr, "warning: %v\n", err)
		} else {
			defer restore()
			opts.TerminalSizeQueue = sizes
		}
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

// localTerminal puts the terminal fd in raw mode (keys go to the remote
// terminal as typed, ^C included) and follows its size (SIGWINCH), as
// kubectl exec -it does; restore puts it back. Stdin that is not a terminal
// is left as it is (no size to follow).
func localTerminal(ctx context.Context, fd int) (restore func(), sizes remotecommand.TerminalSizeQueue, err error) {
	if !term.IsTerminal(fd) {
		return func() {}, nil, nil
	}
	old, err := term.MakeRaw(fd)
	if err != nil {
		return nil, nil, fmt.Errorf("stdin stays in cooked mode: %w", err)
	}
	q := &sizeQueue{fd: fd, ch: make(chan remotecommand.TerminalSize, 1), done: make(chan struct{})}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	q.push()
	go func() {
		for {
			select {
			case <-winch:
				q.push()
			case <-ctx.Done():
				return
			case <-q.done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		close(q.done)
		_ = term.Restore(fd, old)
	}, q, nil
}

// sizeQueue gives the terminal's size each time it changes.
type sizeQueue struct {
	fd   int
	ch   chan remotecommand.TerminalSize
	done chan struct{}
}

// push queues the current size, replacing one not yet taken.
func (q *sizeQueue) push() {
	w, h, err := term.GetSize(q.fd)
	if err != nil {
		return
	}
	s := remotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}
	select {
	case <-q.ch:
	default:
	}
	q.ch <- s
}

// Next is the next size; nil once the session is over.
func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case s := <-q.ch:
		return &s
	case <-q.done:
		return nil
	}
}
