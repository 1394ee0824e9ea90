package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// CreateNamespace creates namespace name (generated from name as a prefix
// when it ends in "-"), unless it exists, and waits for its default service
// account (a pod created before it is refused). It returns the name.
func CreateNamespace(ctx context.Context, c kubernetes.Interface, name string) (string, error) {
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if strings.HasSuffix(name, "-") {
		ns.ObjectMeta = metav1.ObjectMeta{GenerateName: name}
	}
	got, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	switch {
	case err == nil:
		name = got.Name
	case !apierrors.IsAlreadyExists(err):
		return "", err
	}
	if !Poll(time.Minute, 200*time.Millisecond, func() bool {
		_, err := c.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}) {
		return "", fmt.Errorf("no default service account in %s", name)
	}
	return name, nil
}
