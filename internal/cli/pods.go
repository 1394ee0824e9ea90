package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/internal/server"
)

// row is a pod's line in `nodelet pods`.
type row struct {
	Namespace, Name, Ready, Status, Restarts, Age, IP, Source string
}

// podRow is what kubectl get pods says of pod at now: READY counts the
// ready app containers and sidecars, STATUS is the phase unless a reason
// says more (the pod's reason, an init container's state as Init:...,
// a container's waiting or terminated reason, Terminating), RESTARTS the
// restarts of the containers that decide the status.
func podRow(pod *v1.Pod, now time.Time) row {
	r := row{Namespace: pod.Namespace, Name: pod.Name, IP: pod.Status.PodIP, Source: server.PodSource(pod)}
	if r.IP == "" {
		r.IP = "<none>"
	}
	if _, ok := pod.Annotations["kubernetes.io/config.mirror"]; ok {
		r.Source = "mirror"
	}
	// A static pod has no creation time of its own: its start is its age.
	r.Age = "<unknown>"
	if !pod.CreationTimestamp.IsZero() {
		r.Age = duration.HumanDuration(now.Sub(pod.CreationTimestamp.Time))
	} else if pod.Status.StartTime != nil {
		r.Age = duration.HumanDuration(now.Sub(pod.Status.StartTime.Time))
	}
	reason := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	total, ready, restarts := len(pod.Spec.Containers), 0, int32(0)
	sidecars := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
			total++
		}
	}
	initializing := false
	for i, cs := range pod.Status.InitContainerStatuses {
		restarts += cs.RestartCount
		if sidecars[cs.Name] {
			if cs.Started != nil && *cs.Started {
				if cs.Ready {
					ready++
				}
				continue
			}
		}
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			continue
		case cs.State.Terminated != nil:
			switch {
			case cs.State.Terminated.Reason != "":
				reason = "Init:" + cs.State.Terminated.Reason
			case cs.State.Terminated.Signal != 0:
				reason = fmt.Sprintf("Init:Signal:%d", cs.State.Terminated.Signal)
			default:
				reason = fmt.Sprintf("Init:ExitCode:%d", cs.State.Terminated.ExitCode)
			}
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + cs.State.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}
	if !initializing {
		restarts = 0
		for _, cs := range pod.Status.InitContainerStatuses {
			if sidecars[cs.Name] {
				restarts += cs.RestartCount
			}
		}
		hasRunning := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := pod.Status.ContainerStatuses[i]
			restarts += cs.RestartCount
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				reason = cs.State.Waiting.Reason
			case cs.State.Terminated != nil && cs.State.Terminated.Reason != "":
				reason = cs.State.Terminated.Reason
			case cs.State.Terminated != nil && cs.State.Terminated.Signal != 0:
				reason = fmt.Sprintf("Signal:%d", cs.State.Terminated.Signal)
			case cs.State.Terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", cs.State.Terminated.ExitCode)
			case cs.Ready && cs.State.Running != nil:
				hasRunning = true
				ready++
			}
		}
		if reason == "Completed" && hasRunning {
			reason = "NotReady"
			for _, c := range pod.Status.Conditions {
				if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
					reason = "Running"
				}
			}
		}
	}
	if pod.DeletionTimestamp != nil {
		reason = "Terminating"
	}
	r.Ready = fmt.Sprintf("%d/%d", ready, total)
	r.Status = reason
	r.Restarts = strconv.Itoa(int(restarts))
	return r
}

// printPods writes the pods as a table (wide: with IP and SOURCE, the one
// of sources by UID when it has one), their names, JSON (a v1 PodList) or
// YAML.
func printPods(w io.Writer, pods []v1.Pod, sources map[types.UID]string, output string, now time.Time) error {
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	switch output {
	case "json", "yaml":
		list := v1.PodList{Items: pods}
		list.Kind, list.APIVersion = "List", "v1"
		b, err := json.MarshalIndent(list, "", "    ")
		if err != nil {
			return err
		}
		if output == "yaml" {
			if b, err = yaml.JSONToYAML(b); err != nil {
				return err
			}
		}
		_, err = w.Write(append(b, '\n'))
		return err
	case "name":
		for _, p := range pods {
			if _, err := fmt.Fprintln(w, p.Name); err != nil {
				return err
			}
		}
		return nil
	case "", "wide":
	default:
		return fmt.Errorf("unknown output format %q: use wide, name, json or yaml", output)
	}
	if len(pods) == 0 {
		_, err := fmt.Fprintln(w, "No pods on this node.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := "NAMESPACE\tNAME\tREADY\tSTATUS\tRESTARTS\tAGE"
	if output == "wide" {
		header += "\tIP\tSOURCE"
	}
	fmt.Fprintln(tw, header)
	for i := range pods {
		r := podRow(&pods[i], now)
		if src, ok := sources[pods[i].UID]; ok {
			r.Source = src
		}
		line := r.Namespace + "\t" + r.Name + "\t" + r.Ready + "\t" + r.Status + "\t" + r.Restarts + "\t" + r.Age
		if output == "wide" {
			line += "\t" + r.IP + "\t" + r.Source
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}
