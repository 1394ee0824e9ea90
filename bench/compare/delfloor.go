package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	nodeagent "github.com/nodelet/nodelet/test/agent"
)

// DeletionFloor is the runtime's own time to stop the deletion scenario's
// pods: the same pods (the container whose process exits on SIGTERM)
// created straight through the CRI by this program, then stopped as a
// kubelet stops a pod, StopContainer with the 2 s minimum grace period and
// then StopPodSandbox, with no agent or API server. Each pod's time runs
// from the first stop call to its sandbox no longer listed ready, polled
// as the agents' deletion scenario polls it.
type DeletionFloor struct {
	Pods int `json:"pods"`
	// Concurrency: how many pods are stopped at once (Pods: every pod at
	// once, as any agent does when they are deleted together; 1: one pod
	// after the other, the order in which the median pod is stopped
	// soonest, had the later pods' SIGTERM waited).
	Concurrency  int       `json:"concurrency"`
	When         string    `json:"when,omitempty"`
	Failed       int       `json:"failed,omitempty"`
	FirstError   string    `json:"firstError,omitempty"`
	PodStopped   Stats     `json:"podStoppedMs"`
	AllSeconds   float64   `json:"allSeconds"`
	PodStoppedMs []float64 `json:"podStoppedMsAll"`
}

// deletionFloor creates n floor pods, waits for them to run, then stops
// them conc at a time and removes them.
func (h *harness) deletionFloor(ctx context.Context, n, conc int) (*DeletionFloor, error) {
	ns := fmt.Sprintf("%sdelfloor-%d", nsPrefix, time.Now().UnixNano())
	logDir, err := os.MkdirTemp("", "delfloor-logs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(logDir)
	defer func() {
		if err := h.removeSandboxes(context.Background(), ns); err != nil {
			log.Printf("deletion floor cleanup: %v", err)
		}
		nodeagent.RemoveKubepods()
	}()
	if conc <= 0 || conc > n {
		conc = n
	}
	pods := make([]floorIDs, n)
	names := make([]string, n)
	if err := forEach(podNames("df", n), func(name string) error {
		var i int
		if _, err := fmt.Sscanf(name, "df-%d", &i); err != nil {
			return err
		}
		ids, err := h.floorPod(ctx, ns, name, filepath.Join(logDir, name), trapCommand)
		pods[i], names[i] = ids, name
		return err
	}); err != nil {
		return nil, err
	}
	// As the agents' scenario: the shell has installed its trap.
	time.Sleep(2 * time.Second)
	settle()
	t0 := time.Now()
	var (
		mu      sync.Mutex
		stopped = map[string]time.Time{}
		errs    []error
	)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for time.Since(t0) < 3*time.Minute {
			ready, err := nodeagent.ReadySandboxPods(ctx, h.floorRT, ns)
			if err == nil {
				now := time.Now()
				mu.Lock()
				for _, name := range names {
					if _, seen := stopped[name]; !seen && !ready[name] {
						stopped[name] = now
					}
				}
				mu.Unlock()
				if len(ready) == 0 {
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	stop := func(i int) {
		err := h.floorRT.StopContainer(ctx, pods[i].container, 2)
		if err == nil {
			err = h.floorRT.StopPodSandbox(ctx, pods[i].sandbox)
		}
		if err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("%s: %w", names[i], err))
			mu.Unlock()
		}
	}
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i := range pods {
		// In order: with one at a time, pod 0, then pod 1, ...
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			stop(i)
		}()
	}
	wg.Wait()
	<-polled
	var per []float64
	var last time.Time
	for _, at := range stopped {
		per = append(per, ms(at.Sub(t0)))
		if at.After(last) {
			last = at
		}
	}
	if len(per) == 0 {
		return nil, fmt.Errorf("no floor pod stopped; first error: %v", errs)
	}
	sort.Float64s(per)
	f := &DeletionFloor{Pods: n, Concurrency: conc, PodStopped: stats(per), AllSeconds: last.Sub(t0).Seconds(), PodStoppedMs: per, Failed: len(errs)}
	if len(errs) > 0 {
		f.FirstError = errs[0].Error()
	}
	log.Printf("deletion floor, %d pods, %d at a time: stopped p50 %.0f p99 %.0f ms, all %.2f s", n, conc, f.PodStopped.P50, f.PodStopped.P99, f.AllSeconds)
	return f, nil
}
