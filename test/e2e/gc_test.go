package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// hasImage reports whether the runtime has the image ref.
func hasImage(t *testing.T, s *framework.Stack, ref string) bool {
	t.Helper()
	st, err := s.Images.ImageStatus(context.Background(), &runtimeapi.ImageSpec{Image: ref}, false)
	if err != nil {
		t.Fatal(err)
	}
	return st.GetImage() != nil
}

func pull(t *testing.T, s *framework.Stack, refs ...string) {
	t.Helper()
	for _, ref := range refs {
		if _, err := s.Images.PullImage(context.Background(), &runtimeapi.ImageSpec{Image: ref}, nil, nil); err != nil {
			t.Fatalf("pull %s: %v", ref, err)
		}
	}
}

// TestImageGC mirrors upstream's image_gc_test.go on a private containerd
// v2 (so no other test's images go): with imageMaximumGCAge 15 s, the
// unused images go once unused that long (reason age), while the image a
// running pod uses and the pinned sandbox image stay; the records are in
// <root-dir>/image-gc-state.json. Restarted with the high threshold at 1%
// (the disk is fuller than that), the unused images go at the first
// collection (reason space) and, since the disk stays above the low
// threshold (0%), the collection says it could not free enough
// (FreeDiskSpaceFailed's message).
func TestImageGC(t *testing.T) {
	s := framework.RequireStack(t)
	slow := s.Env["SLOW_IMAGE_REPO"]
	if slow == "" {
		t.Fatal(".stack/env lacks SLOW_IMAGE_REPO: run hack/stack-up.sh")
	}
	rs := framework.StartContainerd2(t, s)
	victims := []string{slow + ":1", slow + ":2"}
	pull(t, rs, victims...)
	n := framework.NewNodelet(t, rs, "e2e-imagegc")
	n.AppendConfig("imageMinimumGCAge: 1s\nimageMaximumGCAge: 15s\n")
	n.ExtraArgs = append(n.ExtraArgs, "--image-gc-period=2s", "--container-gc-period=2s")
	n.WriteManifest("user.yaml", podManifest("user", "", container("c", "sleep 3600")))
	n.Start()
	started := time.Now()
	waitRunning(t, rs, n.PodName("user"), "c", 60*time.Second)
	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, func() bool {
		return !hasImage(t, rs, victims[0]) && !hasImage(t, rs, victims[1])
	}, "the unused images collected for their age")
	t.Logf("unused images collected %v after the start (imageMaximumGCAge 15 s)", time.Since(started).Round(100*time.Millisecond))
	if time.Since(started) < 15*time.Second {
		t.Errorf("collected before imageMaximumGCAge")
	}
	for _, ref := range []string{busybox, s.Env["PAUSE_IMAGE"]} {
		if !hasImage(t, rs, ref) {
			t.Errorf("%s (in use, or the sandbox image) was collected", ref)
		}
	}
	if log := n.Log(); !strings.Contains(log, `"Removing image to free bytes"`) || !strings.Contains(log, `reason="age"`) {
		t.Errorf("no removal for age in the log")
	}
	data, err := os.ReadFile(filepath.Join(n.RootDir, "image-gc-state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var records map[string]struct{ LastUsed time.Time }
	if err := json.Unmarshal(data, &records); err != nil {
		t.Fatal(err)
	}
	used := 0
	for _, r := range records {
		if !r.LastUsed.IsZero() {
			used++
		}
	}
	if used == 0 {
		t.Errorf("no image recorded as used: %s", data)
	}

	n.Stop()
	pull(t, rs, victims...)
	n.ExtraArgs = append(n.ExtraArgs, "--image-gc-high-threshold=1", "--image-gc-low-threshold=0")
	n.Start()
	framework.Eventually(t, 30*time.Second, 500*time.Millisecond, func() bool {
		return !hasImage(t, rs, victims[0]) && !hasImage(t, rs, victims[1])
	}, "the unused images collected for space")
	framework.Eventually(t, 20*time.Second, 500*time.Millisecond, func() bool {
		log := n.Log()
		return strings.Contains(log, `reason="space"`) && strings.Contains(log, "Insufficient free disk space on the node's image filesystem")
	}, "a removal for space, then FreeDiskSpaceFailed's message")
	for _, ref := range []string{busybox, s.Env["PAUSE_IMAGE"]} {
		if !hasImage(t, rs, ref) {
			t.Errorf("%s (in use, or the sandbox image) was collected for space", ref)
		}
	}
}

// TestContainerGC mirrors upstream's garbage_collector_test.go: a
// crash-looping container keeps at most one dead instance beside the
// current one (maximum-dead-containers-per-container 1, collected every
// 2 s here), the finished container of a completed pod stays, and a
// removed pod leaves no container or sandbox.
func TestContainerGC(t *testing.T) {
	s := framework.RequireStack(t)
	n := framework.NewNodelet(t, s, "e2e-containergc")
	n.ExtraArgs = append(n.ExtraArgs, "--container-gc-period=2s")
	n.Start()
	n.WriteManifest("crash.yaml", podManifest("crash", "", container("c", "exit 1")))
	n.WriteManifest("done.yaml", podManifest("done", "  restartPolicy: Never\n", container("c", "exit 0")))
	crash, done := n.PodName("crash"), n.PodName("done")
	// Attempt 2 starts 10 s after attempt 1 dies: by then two instances
	// were dead.
	framework.Eventually(t, 60*time.Second, 250*time.Millisecond, func() bool {
		for _, c := range s.Containers(t, crash, "c") {
			if c.GetMetadata().GetAttempt() >= 2 {
				return true
			}
		}
		return false
	}, "attempt 2 of the crashing container")
	deadOf := func(pod string) (dead []string) {
		for _, c := range s.Containers(t, pod, "c") {
			if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				dead = append(dead, fmt.Sprint(c.GetMetadata().GetAttempt()))
			}
		}
		return dead
	}
	framework.Eventually(t, 10*time.Second, 250*time.Millisecond, func() bool {
		return len(deadOf(crash)) <= 1
	}, "at most one dead instance of the crashing container")
	// It stays so over several collections.
	for i := 0; i < 8; i++ {
		time.Sleep(time.Second)
		if d := deadOf(crash); len(d) > 1 {
			t.Errorf("dead instances %v", d)
			break
		}
	}
	if d := deadOf(done); len(d) != 1 {
		t.Errorf("the completed pod's containers: %v dead, want its one", d)
	}
	n.RemoveManifest("crash.yaml")
	framework.Eventually(t, 30*time.Second, 250*time.Millisecond, func() bool {
		return len(s.Containers(t, crash, "c")) == 0 && len(s.Sandboxes(t, crash)) == 0
	}, "the removed pod's containers and sandboxes gone")
}
