package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// TestSubPaths: subPathExpr expands the container's env; a subPath that a
// container turned into a symlink out of the volume is refused.
func TestSubPaths(t *testing.T) {
	s := framework.RequireStack(t)
	n := framework.NewNodelet(t, s, "e2e-subpath")
	n.Start()
	n.WriteManifest("sub.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: sub
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - name: shared
    emptyDir: {}
  initContainers:
  - name: plant
    image: docker.io/library/busybox:1.36
    command: ["sh", "-c", "ln -s /etc /shared/evil; mkdir -p /shared/sub-e2e-subpath && echo hi > /shared/sub-e2e-subpath/f"]
    volumeMounts:
    - {name: shared, mountPath: /shared}
  containers:
  - name: good
    image: docker.io/library/busybox:1.36
    command: ["sh", "-c", "cat /mine/f; sleep 3600"]
    env:
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    volumeMounts:
    - {name: shared, mountPath: /mine, subPathExpr: $(POD_NAME)}
  - name: evil
    image: docker.io/library/busybox:1.36
    command: ["sh", "-c", "sleep 3600"]
    volumeMounts:
    - {name: shared, mountPath: /host-etc, subPath: evil}
`)
	pod := n.PodName("sub")
	good := waitRunning(t, s, pod, "good", 60*time.Second)
	logPath := s.ContainerStatus(t, good.Id).LogPath
	framework.Eventually(t, 10*time.Second, 100*time.Millisecond, func() bool {
		data, _ := os.ReadFile(logPath)
		return strings.Contains(string(data), "stdout F hi")
	}, "the subPathExpr mount showing the file the init container wrote")
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		return strings.Contains(n.Log(), "evil=Waiting(CreateContainerConfigError)") && strings.Contains(n.Log(), "leads out of the volume")
	}, "the symlinked subPath refused")
	if c := s.RunningContainer(t, pod, "evil"); c != nil {
		t.Fatal("a container got a subPath that leads out of its volume")
	}
}
