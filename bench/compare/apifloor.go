package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodeagent "github.com/nodelet/nodelet/test/agent"
)

// absentNode is the node the API floor's pods are bound to: no agent
// serves it, so only the control plane and this program handle them.
const absentNode = "bench-absent"

// controlPlane are the control plane's processes (otherPids' keys).
var controlPlane = []string{"kube-apiserver", "etcd", "kube-scheduler", "kube-controller-manager"}

// APIFloor is the control plane's own work for a direct burst, without an
// agent: the same pods created at once with spec.nodeName set, to a node no
// agent serves, followed by this program's watch, over the window a burst
// measures (from the first create to 5 s after the last). What the control
// plane spends here every agent's burst costs too; what it spends beyond
// this in a burst is the agent's requests (its watch, token requests,
// status writes, events).
type APIFloor struct {
	Pods int    `json:"pods"`
	When string `json:"when,omitempty"`
	// Requests: the node identity also made the requests every kubelet
	// makes for a pod that starts (kubeletRequests), with no agent.
	Requests bool `json:"requests,omitempty"`
	// RequestSeconds: from the first create to the last of those requests.
	RequestSeconds float64 `json:"requestSeconds,omitempty"`
	CreateSeconds  float64 `json:"createSeconds"`
	WindowSeconds  float64 `json:"windowSeconds"`
	// CPUSeconds: the control plane's processes, this program and the
	// machine over the window.
	CPUSeconds map[string]float64 `json:"cpuSeconds"`
}

// apiFloor creates n pods bound to absentNode at once, measures the window,
// then removes them and their namespace. requests: the pods are bound to
// the benchmark's node instead (no agent runs then), which watches its
// pods and makes a kubelet's requests for each (kubeletRequests), as its
// node identity; the window then ends 5 s after the last of them.
func (h *harness) apiFloor(ctx context.Context, n int, requests bool) (*APIFloor, error) {
	ns, err := nodeagent.CreateNamespace(ctx, h.client, nsPrefix+"apifloor-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := h.client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
			log.Printf("API floor cleanup: %v", err)
		}
	}()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tr, err := h.watchNamespace(wctx, ns)
	if err != nil {
		return nil, err
	}
	names := podNames("a", n)
	defer func() {
		if err := h.deleteAll(context.Background(), ns, names, new(int64)); err != nil {
			log.Printf("API floor cleanup: %v", err)
		}
	}()
	settle()
	others := h.otherPids()
	cpu := func() map[string]float64 {
		m := map[string]float64{"machine": machineBusy()}
		for _, k := range controlPlane {
			if p, err := readProc(others[k]); err == nil {
				m[k] = p.CPU
			}
		}
		if p, err := readProc(os.Getpid()); err == nil {
			m["benchmark"] = p.CPU
		}
		return m
	}
	node := absentNode
	var kr *kubeletRequests
	if requests {
		node = h.o.Node
		if kr, err = h.newKubeletRequests(wctx, ns); err != nil {
			return nil, err
		}
	}
	before := cpu()
	start := time.Now()
	tr.reset(names)
	err = forEach(names, func(name string) error {
		p := h.benchPod(name, false, true)
		p.Spec.NodeName = node
		created, err := h.client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err == nil && kr != nil {
			kr.add(created)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("API floor: %w", err)
	}
	created := time.Now()
	f := &APIFloor{Pods: n, Requests: requests, CreateSeconds: created.Sub(start).Seconds()}
	if kr != nil {
		if err := kr.wait(n, 2*time.Minute); err != nil {
			return nil, fmt.Errorf("API floor: %w", err)
		}
		f.RequestSeconds = time.Since(start).Seconds()
	}
	time.Sleep(5 * time.Second)
	used := cpu()
	for k := range used {
		used[k] -= before[k]
	}
	f.WindowSeconds, f.CPUSeconds = time.Since(start).Seconds(), used
	log.Printf("API floor, %d pods, a kubelet's requests %v: created in %.2f s, requests done after %.2f s, CPU-s over %.1f s: %v",
		n, requests, f.CreateSeconds, f.RequestSeconds, f.WindowSeconds, used)
	return f, nil
}

// controlPlaneSum is the control plane's CPU seconds in a CPU map.
func controlPlaneSum(m map[string]float64) float64 {
	var sum float64
	for _, k := range controlPlane {
		sum += m[k]
	}
	return sum
}
