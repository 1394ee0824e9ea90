package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/server"
	"github.com/nodelet/nodelet/internal/source/manifest"
)

// failedWaiting are the waiting reasons `nodelet run` gives up on: the pod
// will not start without a change.
var failedWaiting = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CrashLoopBackOff": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// outcome says whether `nodelet run` is done with pod: it runs (every
// container ready, or running without a readiness probe) or has
// succeeded (ok), or it failed or will not start (not ok, why).
func outcome(pod *v1.Pod) (done, ok bool, why string) {
	switch pod.Status.Phase {
	case v1.PodSucceeded:
		return true, true, "succeeded"
	case v1.PodFailed:
		why = "failed"
		if pod.Status.Reason != "" {
			why += ": " + pod.Status.Reason + ": " + pod.Status.Message
		}
		return true, false, why
	}
	for _, cs := range append(append([]v1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && failedWaiting[w.Reason] {
			why = fmt.Sprintf("container %s: %s", cs.Name, w.Reason)
			if w.Message != "" {
				why += ": " + w.Message
			}
			return true, false, why
		}
	}
	if pod.Status.Phase != v1.PodRunning {
		return false, false, ""
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			return true, true, "running and ready"
		}
	}
	return false, false, ""
}

func (c *client) info(ctx context.Context) (*server.LocalInfo, error) {
	var in server.LocalInfo
	return &in, c.getJSON(ctx, "/nodelet/info", &in)
}

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	var c common
	c.add(fs)
	filename := fs.StringP("filename", "f", "", "The pod manifest (YAML or JSON, one or more pods; - for stdin).")
	timeout := fs.Duration("timeout", 5*time.Minute, "How long to follow the pod before giving up.")
	if code, stop := parse(fs, args, "Run a pod on this node: its manifest goes into nodelet's static pod directory and the pod is followed, its events printed, until it runs (exit 0) or fails (exit 1).\n\nUsage:\n  nodelet run -f FILE [--timeout D]", stderr); stop {
		return code
	}
	if *filename == "" || fs.NArg() > 0 {
		return fail(stderr, errors.New("nodelet run takes -f FILE and no arguments"))
	}
	cl := c.client()
	in, err := cl.info(ctx)
	if err != nil {
		return fail(stderr, err)
	}
	if in.StaticPodPath == "" {
		return fail(stderr, errors.New("nodelet runs without a static pod directory (staticPodPath)"))
	}
	var data []byte
	name := filepath.Base(*filename)
	if *filename == "-" {
		data, err = io.ReadAll(os.Stdin)
		name = ""
	} else {
		data, err = os.ReadFile(*filename)
	}
	if err != nil {
		return fail(stderr, err)
	}
	pods, warnings, err := manifest.Decode(data, podspec.Origin{Source: podspec.FileSource, Location: *filename}, in.NodeName)
	if err != nil {
		return fail(stderr, fmt.Errorf("%s: %w", *filename, err))
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if name == "" {
		name = pods[0].Name[:len(pods[0].Name)-len(in.NodeName)-1] + ".yaml"
	}
	dest := filepath.Join(in.StaticPodPath, name)
	if _, err := os.Stat(dest); err == nil {
		return fail(stderr, fmt.Errorf("%s exists: nodelet rm its pod first, or name the file otherwise", dest))
	}
	tmp := filepath.Join(in.StaticPodPath, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fail(stderr, err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		os.Remove(tmp)
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "%s written\n", dest)
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	code := 0
	for _, want := range pods {
		if !follow(ctx, cl, want.Namespace, want.Name, stdout) {
			code = 1
		}
	}
	return code
}

// follow prints the pod's new events until outcome says it is done; it
// says whether the pod runs.
func follow(ctx context.Context, cl *client, namespace, name string, stdout io.Writer) bool {
	seen := map[string]bool{}
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for {
		pods, err := cl.pods(ctx)
		if err == nil {
			for i := range pods {
				p := &pods[i]
				if p.Namespace != namespace || p.Name != name {
					continue
				}
				events, _ := cl.events(ctx, p) // the next round tries again
				for _, e := range events {
					key := fmt.Sprintf("%s/%s/%s/%d", e.InvolvedObject.FieldPath, e.Reason, e.Message, e.Count)
					if !seen[key] {
						seen[key] = true
						fmt.Fprintf(stdout, "  %s\t%s\t%s\n", e.Type, e.Reason, strings.TrimSpace(e.Message))
					}
				}
				if done, ok, why := outcome(p); done {
					fmt.Fprintf(stdout, "pod %s/%s %s\n", namespace, name, why)
					return ok
				}
			}
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(stdout, "pod %s/%s: gave up waiting (%v)\n", namespace, name, ctx.Err())
			return false
		case <-tick.C:
		}
	}
}

func rmCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("rm", pflag.ContinueOnError)
	var c common
	c.add(fs)
	c.addNamespace(fs)
	wait := fs.Bool("wait", true, "Wait until the pod is gone.")
	if code, stop := parse(fs, args, "Remove a static pod: its manifest leaves nodelet's static pod directory and the pod is stopped.\n\nUsage:\n  nodelet rm POD [--wait=false]", stderr); stop {
		return code
	}
	if fs.NArg() != 1 {
		return fail(stderr, fmt.Errorf("nodelet rm takes one pod, got %v", fs.Args()))
	}
	cl := c.client()
	in, err := cl.info(ctx)
	if err != nil {
		return fail(stderr, err)
	}
	_, pod, err := c.pod(ctx, fs.Arg(0))
	if err != nil {
		return fail(stderr, err)
	}
	switch pod.Annotations[podspec.ConfigSourceAnnotationKey] {
	case podspec.FileSource:
	case podspec.HTTPSource:
		return fail(stderr, fmt.Errorf("pod %s/%s comes from the manifest URL (staticPodURL): remove it there", pod.Namespace, pod.Name))
	default:
		return fail(stderr, fmt.Errorf("pod %s/%s comes from the API server: delete it there (kubectl delete pod)", pod.Namespace, pod.Name))
	}
	path, err := manifestOf(in, pod)
	if err != nil {
		return fail(stderr, err)
	}
	if err := os.Remove(path); err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "%s removed\n", path)
	if !*wait {
		return 0
	}
	for {
		pods, err := cl.pods(ctx)
		if err != nil {
			return fail(stderr, err)
		}
		if _, err := findPod(pods, pod.Namespace, pod.Name); err != nil {
			// Out of the node's pods, it may still be stopping (its grace
			// period): gone once nothing of it runs.
			running, err := cl.runningPods(ctx)
			if err != nil {
				return fail(stderr, err)
			}
			if !hasUID(running, pod.UID) {
				fmt.Fprintf(stdout, "pod %s/%s gone\n", pod.Namespace, pod.Name)
				return 0
			}
		}
		select {
		case <-ctx.Done():
			return fail(stderr, ctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// hasUID tells whether a pod of pods has the UID uid.
func hasUID(pods []v1.Pod, uid types.UID) bool {
	for i := range pods {
		if pods[i].UID == uid {
			return true
		}
	}
	return false
}

// manifestOf is the file of the static pod directory that holds pod.
func manifestOf(in *server.LocalInfo, pod *v1.Pod) (string, error) {
	ents, err := os.ReadDir(in.StaticPodPath)
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(in.StaticPodPath, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		pods, _, err := manifest.Decode(data, podspec.Origin{Source: podspec.FileSource, Location: path}, in.NodeName)
		if err != nil {
			continue
		}
		for _, p := range pods {
			if p.Namespace == pod.Namespace && p.Name == pod.Name {
				return path, nil
			}
		}
	}
	return "", fmt.Errorf("no manifest in %s holds pod %s/%s", in.StaticPodPath, pod.Namespace, pod.Name)
}
