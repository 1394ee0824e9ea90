package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeletRequests makes, as the benchmark node's identity and with no agent
// running, the API requests every kubelet makes for a pod that starts
// without incident, and nothing else: a watch of the node's pods, a service
// account token bound to the pod (its projected token volume), the Pulled,
// Created and Started events of its container, and one status patch to
// Running with a started, ready container. That is nodelet's set; the
// upstream kubelet makes more (3 status patches, 5 events and 3 reads per
// pod in this benchmark). The API floor with these requests is what the
// control plane spends for any kubelet's burst.
type kubeletRequests struct {
	client kubernetes.Interface
	node   string
	nodeIP string
	image  string
	work   chan *v1.Pod

	mu   sync.Mutex
	done int
	errs []error
}

// kubeletWorkers: requests for this many pods at once (nodelet starts at
// most max(8, 2 x CPUs) pods at once on this machine).
const kubeletWorkers = 8

// newKubeletRequests connects as the benchmark node, starts its watch of
// the node's pods and the workers that make each added pod's requests,
// until ctx is done.
func (h *harness) newKubeletRequests(ctx context.Context, ns string) (*kubeletRequests, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(h.env["CLUSTER_PKI"], "node-"+h.o.Node+".kubeconfig"))
	if err != nil {
		return nil, err
	}
	// As the agents: protobuf, and no client-side throttling in the way.
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = rc.ContentType + ",application/json"
	rc.QPS, rc.Burst = 1000, 2000
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	sel := fields.OneTermEqualSelector("spec.nodeName", h.o.Node).String()
	list, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("the node's pods: %w", err)
	}
	w, err := client.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("watching the node's pods: %w", err)
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-w.ResultChan():
				if !ok {
					return
				}
			}
		}
	}()
	kr := &kubeletRequests{client: client, node: h.o.Node, nodeIP: h.env["NODE_IP"], image: h.env["BUSYBOX_IMAGE"], work: make(chan *v1.Pod, 10000)}
	for range kubeletWorkers {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case p := <-kr.work:
					err := kr.start(ctx, p)
					kr.mu.Lock()
					kr.done++
					if err != nil {
						kr.errs = append(kr.errs, fmt.Errorf("%s: %w", p.Name, err))
					}
					kr.mu.Unlock()
				}
			}
		}()
	}
	return kr, nil
}

// add queues a created pod's requests.
func (kr *kubeletRequests) add(p *v1.Pod) { kr.work <- p }

// wait waits until n pods' requests were made; the first failure, if any.
func (kr *kubeletRequests) wait(n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		kr.mu.Lock()
		done, errs := kr.done, kr.errs
		kr.mu.Unlock()
		if done >= n {
			if len(errs) > 0 {
				return fmt.Errorf("%d of %d pods' requests failed; first: %w", len(errs), n, errs[0])
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the requests of %d of %d pods were made in %v", done, n, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// start makes one pod's requests, in a kubelet's order.
func (kr *kubeletRequests) start(ctx context.Context, p *v1.Pod) error {
	if err := kr.token(ctx, p); err != nil {
		return fmt.Errorf("token: %w", err)
	}
	for _, e := range [][2]string{
		{"Pulled", fmt.Sprintf("Container image %q already present on machine", kr.image)},
		{"Created", "Created container: c"},
		{"Started", "Started container c"},
	} {
		if err := kr.event(ctx, p, e[0], e[1]); err != nil {
			return fmt.Errorf("event %s: %w", e[0], err)
		}
	}
	if err := kr.status(ctx, p); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	return nil
}

// token requests the pod's service account token as its projected volume
// does, retrying while the API server's node authorizer and
// NodeRestriction have not seen the pod yet (as nodelet: 20 ms doubling).
func (kr *kubeletRequests) token(ctx context.Context, p *v1.Pod) error {
	exp := int64(3607)
	req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
	}}
	delay := 20 * time.Millisecond
	for {
		_, err := kr.client.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, "default", req, metav1.CreateOptions{})
		if err == nil || (!apierrors.IsNotFound(err) && !apierrors.IsForbidden(err)) || delay > 640*time.Millisecond {
			return err
		}
		time.Sleep(delay)
		delay *= 2
	}
}

// event records one of the container's events as client-go's recorder
// writes them for a kubelet.
func (kr *kubeletRequests) event(ctx context.Context, p *v1.Pod, reason, msg string) error {
	now := metav1.Now()
	ev := &v1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", p.Name, now.UnixNano()), Namespace: p.Namespace},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID,
			ResourceVersion: p.ResourceVersion, FieldPath: "spec.containers{c}"},
		Reason: reason, Message: msg, Type: v1.EventTypeNormal, Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
		Source:              v1.EventSource{Component: "kubelet", Host: kr.node},
		ReportingController: "kubelet", ReportingInstance: kr.node,
	}
	_, err := kr.client.CoreV1().Events(p.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	return err
}

// status patches the pod's status to Running with its container started
// and ready: a strategic merge patch against the created pod's status,
// with the UID as a precondition (nodelet's patch).
func (kr *kubeletRequests) status(ctx context.Context, p *v1.Pod) error {
	now := metav1.Now()
	sum := sha256.Sum256([]byte(p.UID))
	ip := fmt.Sprintf("10.88.%d.%d", 100+sum[0]%100, 1+sum[1]%250)
	want := *p.Status.DeepCopy()
	want.Phase = v1.PodRunning
	want.HostIP, want.HostIPs = kr.nodeIP, []v1.HostIP{{IP: kr.nodeIP}}
	want.PodIP, want.PodIPs = ip, []v1.PodIP{{IP: ip}}
	want.StartTime = &now
	for _, t := range []v1.PodConditionType{"PodReadyToStartContainers", v1.PodInitialized, v1.PodReady, v1.ContainersReady} {
		want.Conditions = append(want.Conditions, v1.PodCondition{Type: t, Status: v1.ConditionTrue, LastTransitionTime: now})
	}
	started := true
	want.ContainerStatuses = []v1.ContainerStatus{{
		Name: "c", Ready: true, Started: &started, Image: kr.image,
		ImageID:     fmt.Sprintf("%s@sha256:%x", kr.image, sha256.Sum256([]byte(kr.image))),
		ContainerID: fmt.Sprintf("containerd://%x", sum),
		State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
	}}
	oldJSON, err := json.Marshal(v1.Pod{Status: p.Status})
	if err != nil {
		return err
	}
	newJSON, err := json.Marshal(v1.Pod{Status: want})
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Pod{})
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return err
	}
	m["metadata"] = map[string]any{"uid": string(p.UID)}
	if patch, err = json.Marshal(m); err != nil {
		return err
	}
	_, err = kr.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
