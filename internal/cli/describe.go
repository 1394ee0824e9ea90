package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/nodelet/nodelet/internal/server"
)

// notReady is one line saying why the pod is not Ready ("" when it is):
// the first container (init containers first) that is waiting (for a
// volume that failed to set up, say), crash looping (with the back-off
// still to wait at now), terminated, or running with a failing readiness
// probe, with the runtime's or the prober's last words (from the events).
func notReady(pod *v1.Pod, events []v1.Event, details server.PodDetails, now time.Time) string {
	backOff := details.BackOff
	// A volume that failed to set up holds the containers that are not
	// created yet.
	volumeWhy := ""
	for _, vs := range details.Volumes {
		if vs.State == server.VolumeFailed {
			volumeWhy = fmt.Sprintf("volume %s (%s) cannot be set up: %s", vs.Name, vs.Kind, vs.Error)
			break
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			return ""
		}
	}
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		if pod.Status.Reason != "" {
			return fmt.Sprintf("the pod has finished (%s): %s: %s", pod.Status.Phase, pod.Status.Reason, pod.Status.Message)
		}
		return fmt.Sprintf("the pod has finished (%s)", pod.Status.Phase)
	}
	lastEvent := func(container, reason string) string {
		for i := len(events) - 1; i >= 0; i-- {
			e := events[i]
			if e.Reason == reason && (container == "" || strings.HasSuffix(e.InvolvedObject.FieldPath, "{"+container+"}")) {
				return e.Message
			}
		}
		return ""
	}
	check := func(kind string, statuses []v1.ContainerStatus, sidecarOrApp func(string) bool) string {
		for _, cs := range statuses {
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff":
				last := ""
				if t := cs.LastTerminationState.Terminated; t != nil {
					last = fmt.Sprintf(", last exit code %d (%s)", t.ExitCode, t.Reason)
				}
				why := fmt.Sprintf("%s %s keeps crashing: restarted %d times%s", kind, cs.Name, cs.RestartCount, last)
				if cs.State.Waiting.Message != "" {
					why += "; " + cs.State.Waiting.Message
				}
				if left, _, ok := backOffLeft(backOff, cs.Name, now); ok {
					why += "; restarts in " + left
				}
				return why
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing" && cs.State.Waiting.Reason != "ContainerCreating":
				msg := cs.State.Waiting.Message
				if msg == "" {
					msg = lastEvent(cs.Name, "Failed")
				}
				return strings.TrimSuffix(fmt.Sprintf("%s %s is waiting: %s: %s", kind, cs.Name, cs.State.Waiting.Reason, msg), ": ")
			case cs.State.Waiting != nil && volumeWhy != "":
				return volumeWhy
			case cs.State.Waiting != nil:
				return fmt.Sprintf("%s %s is being created (%s)", kind, cs.Name, cs.State.Waiting.Reason)
			case cs.State.Running != nil && !cs.Ready && sidecarOrApp(cs.Name):
				if cs.Started != nil && !*cs.Started {
					return fmt.Sprintf("%s %s is running but has not passed its startup probe yet: %s", kind, cs.Name, lastEvent(cs.Name, "Unhealthy"))
				}
				if msg := lastEvent(cs.Name, "Unhealthy"); msg != "" {
					return fmt.Sprintf("%s %s is running but not ready: %s", kind, cs.Name, msg)
				}
				return fmt.Sprintf("%s %s is running but not ready (its readiness probe has not passed yet)", kind, cs.Name)
			case cs.State.Terminated != nil && sidecarOrApp(cs.Name):
				return fmt.Sprintf("%s %s has terminated: %s, exit code %d", kind, cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
			}
		}
		return ""
	}
	sidecars := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
		}
	}
	if why := check("init container", pod.Status.InitContainerStatuses, func(n string) bool { return sidecars[n] }); why != "" {
		return why
	}
	if why := check("container", pod.Status.ContainerStatuses, func(string) bool { return true }); why != "" {
		return why
	}
	if len(pod.Status.ContainerStatuses) == 0 {
		if volumeWhy != "" {
			return volumeWhy
		}
		if msg := lastEvent("", "FailedMount"); msg != "" {
			return "its volumes are not ready: " + msg
		}
		return "its containers have not been created yet"
	}
	return "the pod is not Ready"
}

// backOffLeft is the back-off container still waits at now, rounded up
// to the second, and when it ends.
func backOffLeft(backOff []server.ContainerBackOff, container string, now time.Time) (string, time.Time, bool) {
	for _, b := range backOff {
		if b.Container == container && b.Until.After(now) {
			return (b.Until.Sub(now) + time.Second - 1).Truncate(time.Second).String(), b.Until.Time, true
		}
	}
	return "", time.Time{}, false
}

// describe writes what kubectl describe pod shows, with the events nodelet
// kept, the not-Ready line, the back-off still to wait and the volumes'
// states (details).
func describe(w io.Writer, pod *v1.Pod, events []v1.Event, details server.PodDetails, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	p := func(indent int, k, format string, args ...any) {
		fmt.Fprintf(tw, "%s%s:\t%s\n", strings.Repeat("  ", indent), k, fmt.Sprintf(format, args...))
	}
	r := podRow(pod, now)
	p(0, "Name", "%s", pod.Name)
	p(0, "Namespace", "%s", pod.Namespace)
	p(0, "Node", "%s", pod.Spec.NodeName)
	if details.Source != "" {
		r.Source = details.Source
	}
	p(0, "Source", "%s", r.Source)
	if pod.Status.StartTime != nil {
		p(0, "Start Time", "%s", pod.Status.StartTime.Format(time.RFC1123Z))
	}
	p(0, "Status", "%s", r.Status)
	if pod.Status.Reason != "" {
		p(0, "Reason", "%s", pod.Status.Reason)
	}
	if pod.Status.Message != "" {
		p(0, "Message", "%s", pod.Status.Message)
	}
	p(0, "IP", "%s", pod.Status.PodIP)
	p(0, "QoS Class", "%s", pod.Status.QOSClass)
	if why := notReady(pod, events, details, now); why != "" {
		p(0, "Not Ready", "%s", why)
	}
	statuses := map[string]v1.ContainerStatus{}
	for _, cs := range append(append([]v1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		statuses[cs.Name] = cs
	}
	state := func(indent int, label, container string, s v1.ContainerState) {
		switch {
		case s.Running != nil:
			p(indent, label, "Running")
			p(indent+1, "Started", "%s", s.Running.StartedAt.Format(time.RFC1123Z))
		case s.Waiting != nil:
			p(indent, label, "Waiting")
			p(indent+1, "Reason", "%s", s.Waiting.Reason)
			if s.Waiting.Message != "" {
				p(indent+1, "Message", "%s", s.Waiting.Message)
			}
			if left, until, ok := backOffLeft(details.BackOff, container, now); ok && label == "State" {
				p(indent+1, "Back-off", "%s more to wait (restarts at %s)", left, until.Format(time.RFC1123Z))
			}
		case s.Terminated != nil:
			p(indent, label, "Terminated")
			p(indent+1, "Reason", "%s", s.Terminated.Reason)
			if s.Terminated.Message != "" {
				p(indent+1, "Message", "%s", strings.TrimSpace(s.Terminated.Message))
			}
			p(indent+1, "Exit Code", "%d", s.Terminated.ExitCode)
			p(indent+1, "Finished", "%s", s.Terminated.FinishedAt.Format(time.RFC1123Z))
		}
	}
	containers := func(title string, cs []v1.Container) {
		if len(cs) == 0 {
			return
		}
		fmt.Fprintf(tw, "%s:\n", title)
		for _, c := range cs {
			fmt.Fprintf(tw, "  %s:\n", c.Name)
			p(2, "Image", "%s", c.Image)
			if len(c.Command) > 0 || len(c.Args) > 0 {
				p(2, "Command", "%s", strings.Join(append(append([]string{}, c.Command...), c.Args...), " "))
			}
			if st, ok := statuses[c.Name]; ok {
				state(2, "State", c.Name, st.State)
				if st.LastTerminationState.Terminated != nil {
					state(2, "Last State", c.Name, st.LastTerminationState)
				}
				p(2, "Ready", "%t", st.Ready)
				p(2, "Restart Count", "%d", st.RestartCount)
			}
			for _, pr := range []struct {
				name  string
				probe *v1.Probe
			}{{"Liveness", c.LivenessProbe}, {"Readiness", c.ReadinessProbe}, {"Startup", c.StartupProbe}} {
				if pr.probe != nil {
					p(2, pr.name, "%s", probeString(pr.probe))
				}
			}
		}
	}
	containers("Init Containers", pod.Spec.InitContainers)
	containers("Containers", pod.Spec.Containers)
	if len(pod.Status.Conditions) > 0 {
		fmt.Fprintf(tw, "Conditions:\n  Type\tStatus\n")
		for _, c := range pod.Status.Conditions {
			fmt.Fprintf(tw, "  %s\t%s\n", c.Type, c.Status)
		}
	}
	if len(pod.Spec.Volumes) > 0 {
		fmt.Fprintf(tw, "Volumes:\n")
		states := map[string]server.VolumeState{}
		for _, vs := range details.Volumes {
			states[vs.Name] = vs
		}
		for _, v := range pod.Spec.Volumes {
			fmt.Fprintf(tw, "  %s:\n", v.Name)
			p(2, "Type", "%s", volumeKind(v))
			vs, ok := states[v.Name]
			if !ok {
				continue
			}
			switch vs.State {
			case server.VolumeReady:
				p(2, "State", "Ready (set up %s ago)", duration.HumanDuration(now.Sub(vs.SetUpAt.Time)))
			case server.VolumeFailed:
				p(2, "State", "Failed %s ago: %s", duration.HumanDuration(now.Sub(vs.ErrAt.Time)), vs.Error)
			default:
				p(2, "State", "%s", vs.State)
			}
			if vs.Path != "" {
				p(2, "Path", "%s", vs.Path)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(events) == 0 {
		_, err := fmt.Fprintln(w, "Events:  <none>")
		return err
	}
	fmt.Fprintln(w, "Events:")
	ew := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(ew, "  Type\tReason\tAge\tFrom\tMessage")
	fmt.Fprintln(ew, "  ----\t------\t----\t----\t-------")
	sort.SliceStable(events, func(i, j int) bool { return eventTime(events[i]).Before(eventTime(events[j])) })
	for _, e := range events {
		age := duration.HumanDuration(now.Sub(eventTime(e)))
		if e.Count > 1 {
			age = fmt.Sprintf("%s (x%d over %s)", duration.HumanDuration(now.Sub(e.LastTimestamp.Time)), e.Count, duration.HumanDuration(now.Sub(e.FirstTimestamp.Time)))
		}
		fmt.Fprintf(ew, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, age, e.Source.Component, strings.TrimSpace(e.Message))
	}
	return ew.Flush()
}

func eventTime(e v1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

func probeString(pr *v1.Probe) string {
	var what string
	switch {
	case pr.Exec != nil:
		what = "exec [" + strings.Join(pr.Exec.Command, " ") + "]"
	case pr.HTTPGet != nil:
		what = fmt.Sprintf("http-get %s:%s%s", pr.HTTPGet.Host, pr.HTTPGet.Port.String(), pr.HTTPGet.Path)
	case pr.TCPSocket != nil:
		what = "tcp-socket :" + pr.TCPSocket.Port.String()
	case pr.GRPC != nil:
		what = fmt.Sprintf("grpc :%d", pr.GRPC.Port)
	}
	return fmt.Sprintf("%s delay=%ds timeout=%ds period=%ds #success=%d #failure=%d", what,
		pr.InitialDelaySeconds, pr.TimeoutSeconds, pr.PeriodSeconds, pr.SuccessThreshold, pr.FailureThreshold)
}

func volumeKind(v v1.Volume) string {
	switch {
	case v.EmptyDir != nil:
		return "EmptyDir"
	case v.HostPath != nil:
		return "HostPath " + v.HostPath.Path
	case v.ConfigMap != nil:
		return "ConfigMap " + v.ConfigMap.Name
	case v.Secret != nil:
		return "Secret " + v.Secret.SecretName
	case v.Projected != nil:
		return "Projected"
	case v.DownwardAPI != nil:
		return "DownwardAPI"
	case v.PersistentVolumeClaim != nil:
		return "PersistentVolumeClaim " + v.PersistentVolumeClaim.ClaimName
	case v.CSI != nil:
		return "CSI " + v.CSI.Driver
	case v.Ephemeral != nil:
		return "Ephemeral"
	}
	return "other"
}

func describeCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("describe", pflag.ContinueOnError)
	var c common
	c.add(fs)
	c.addNamespace(fs)
	if code, stop := parse(fs, args, "A pod as nodelet sees it: its containers' states and reasons, probes, volumes, conditions, its recent events, and why it is not Ready.\n\nUsage:\n  nodelet describe POD [-n NAMESPACE]", stderr); stop {
		return code
	}
	names := fs.Args()
	if len(names) == 2 && (names[0] == "pod" || names[0] == "pods") {
		names = names[1:] // kubectl's "describe pod NAME"
	}
	if len(names) != 1 {
		return fail(stderr, fmt.Errorf("nodelet describe takes one pod, got %v", fs.Args()))
	}
	cl, pod, err := c.pod(ctx, names[0])
	if err != nil {
		return fail(stderr, err)
	}
	events, err := cl.events(ctx, pod)
	if err != nil {
		fmt.Fprintf(stderr, "warning: the pod's events: %v\n", err)
	}
	details, err := cl.details(ctx, pod)
	if err != nil {
		fmt.Fprintf(stderr, "warning: the pod's details: %v\n", err)
	}
	if err := describe(stdout, pod, events, details, time.Now()); err != nil {
		return fail(stderr, err)
	}
	return 0
}
