package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nodelet/nodelet/internal/rootdir"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Commands are the CLI's commands, for cmd/nodelet to dispatch.
var Commands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) int{
	"pods":         podsCommand,
	"logs":         logsCommand,
	"describe":     describeCommand,
	"exec":         execCommand,
	"attach":       attachCommand,
	"run":          runCommand,
	"rm":           rmCommand,
	"port-forward": portForwardCommand,
}

// DefaultRootDir is nodelet's default --root-dir.
const DefaultRootDir = "/var/lib/kubelet"

// common are the flags every command takes: where nodelet's socket is;
// and the pod's namespace for those about one pod.
type common struct {
	rootDir, socket, namespace string
}

func (c *common) addNamespace(fs *pflag.FlagSet) {
	fs.StringVarP(&c.namespace, "namespace", "n", "", "The pod's namespace (needed only when the name is in several).")
}

// pod is the pod named name on the running node, and the client that
// found it.
func (c *common) pod(ctx context.Context, name string) (*client, *v1.Pod, error) {
	cl := c.client()
	pods, err := cl.pods(ctx)
	if err != nil {
		return cl, nil, err
	}
	p, err := findPod(pods, c.namespace, name)
	return cl, p, err
}

func (c *common) add(fs *pflag.FlagSet) {
	fs.StringVar(&c.rootDir, "root-dir", DefaultRootDir, "nodelet's --root-dir: its local API is <root-dir>/nodelet.sock.")
	fs.StringVar(&c.socket, "socket", os.Getenv("NODELET_SOCKET"), "nodelet's local API socket (default <root-dir>/nodelet.sock; env NODELET_SOCKET).")
}

func (c *common) client() *client {
	s := c.socket
	if s == "" {
		s = rootdir.Dir(c.rootDir).LocalAPISocket()
	}
	return newClient(s)
}

// parse parses args; it returns the exit code when the command must stop
// (help: 0, a bad flag: 2).
func parse(fs *pflag.FlagSet, args []string, usage string, stderr io.Writer) (int, bool) {
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, "%s\n\nFlags:\n%s", usage, fs.FlagUsages()) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, true
		}
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 2, true
	}
	return 0, false
}

func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "error: %v\n", err)
	return 1
}

func podsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("pods", pflag.ContinueOnError)
	var c common
	c.add(fs)
	output := fs.StringP("output", "o", "", "Output format: wide, name, json or yaml.")
	namespace := fs.StringP("namespace", "n", "", "Only the pods of this namespace.")
	if code, stop := parse(fs, args, "Every pod the node runs (static, from the API server, from the checkpoint), as kubectl get pods shows them.\n\nUsage:\n  nodelet pods [-o wide|name|json|yaml] [-n NAMESPACE]", stderr); stop {
		return code
	}
	if fs.NArg() > 0 {
		return fail(stderr, fmt.Errorf("nodelet pods takes no arguments, got %v", fs.Args()))
	}
	cl := c.client()
	pods, err := cl.pods(ctx)
	if err != nil {
		return fail(stderr, err)
	}
	var sources map[types.UID]string
	if *output == "wide" {
		if sources, err = cl.sources(ctx); err != nil {
			fmt.Fprintf(stderr, "warning: the pods' sources: %v\n", err)
		}
	}
	if *namespace != "" {
		var in []v1.Pod
		for _, p := range pods {
			if p.Namespace == *namespace {
				in = append(in, p)
			}
		}
		pods = in
	}
	if err := printPods(stdout, pods, sources, *output, time.Now()); err != nil {
		return fail(stderr, err)
	}
	return 0
}

// defaultContainer is the container a command means when none is named:
// the only one, or the one the kubectl.kubernetes.io/default-container
// annotation names, or the first (said on stderr, as kubectl does).
func defaultContainer(pod *v1.Pod, stderr io.Writer) string {
	if len(pod.Spec.Containers) == 1 {
		return pod.Spec.Containers[0].Name
	}
	if name := pod.Annotations["kubectl.kubernetes.io/default-container"]; name != "" {
		return name
	}
	var names []string
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		names = append(names, c.Name)
	}
	first := pod.Spec.Containers[0].Name
	fmt.Fprintf(stderr, "Defaulted container %q out of: %s\n", first, strings.Join(names, ", "))
	return first
}

func logsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("logs", pflag.ContinueOnError)
	var c common
	c.add(fs)
	container := fs.StringP("container", "c", "", "The container (default: the pod's only or default one).")
	c.addNamespace(fs)
	follow := fs.BoolP("follow", "f", false, "Follow the log.")
	previous := fs.BoolP("previous", "p", false, "The previous instance of the container (the last one that terminated).")
	tail := fs.Int("tail", -1, "Lines from the end to show; -1: all.")
	timestamps := fs.Bool("timestamps", false, "Prefix each line with its RFC3339 timestamp.")
	since := fs.Duration("since", 0, "Only lines newer than this (e.g. 5m).")
	if code, stop := parse(fs, args, "A container's log, read by nodelet from the CRI log files.\n\nUsage:\n  nodelet logs POD [-c CONTAINER] [-f] [-p] [--tail N] [--since D] [--timestamps]", stderr); stop {
		return code
	}
	if fs.NArg() != 1 {
		return fail(stderr, fmt.Errorf("nodelet logs takes one pod, got %v", fs.Args()))
	}
	cl, pod, err := c.pod(ctx, fs.Arg(0))
	if err != nil {
		return fail(stderr, err)
	}
	name := *container
	if name == "" {
		name = defaultContainer(pod, stderr)
	}
	q := url.Values{}
	if *follow {
		q.Set("follow", "true")
	}
	if *previous {
		q.Set("previous", "true")
	}
	if *tail >= 0 {
		q.Set("tailLines", strconv.Itoa(*tail))
	}
	if *timestamps {
		q.Set("timestamps", "true")
	}
	if *since > 0 {
		q.Set("sinceSeconds", strconv.Itoa(int(since.Seconds())))
	}
	resp, err := cl.get(ctx, "/containerLogs/"+url.PathEscape(pod.Namespace)+"/"+url.PathEscape(pod.Name)+"/"+url.PathEscape(name), q)
	if err != nil {
		return fail(stderr, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(stdout, resp.Body); err != nil && ctx.Err() == nil {
		return fail(stderr, err)
	}
	return 0
}
