package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// StopAPIServer kills the stack's kube-apiserver (SIGKILL: an abrupt
// outage) and waits until it is gone. Run from the repository root.
func StopAPIServer() error {
	data, err := os.ReadFile(filepath.Join(".stack", "cluster", "run", "kube-apiserver.pid"))
	if err != nil {
		return err
	}
	var pid int
	if _, err := fmt.Sscan(string(data), &pid); err != nil {
		return err
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	_ = proc.Signal(syscall.SIGKILL)
	if !Poll(30*time.Second, 100*time.Millisecond, func() bool { return proc.Signal(syscall.Signal(0)) != nil }) {
		return fmt.Errorf("kube-apiserver (pid %d) still running", pid)
	}
	return nil
}

// StartAPIServer starts whatever of the control plane is not running
// (hack/cluster/up.sh) and waits until the controller manager acts on the
// API server again (a new namespace gets its default service account).
func StartAPIServer(c kubernetes.Interface) error {
	cmd := exec.Command("bash", filepath.Join("hack", "cluster", "up.sh"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/cluster/up.sh: %w", err)
	}
	ctx := context.Background()
	ns, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "controllers-"}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = c.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}) }()
	if !Poll(2*time.Minute, 200*time.Millisecond, func() bool {
		_, err := c.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}) {
		return fmt.Errorf("the controller manager is not back (no default service account in %s)", ns.Name)
	}
	return nil
}
