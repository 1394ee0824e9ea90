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

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// podOutput waits until the pod's container printed END and returns its
// logs.
func podOutput(t *testing.T, c *framework.Cluster, ns, pod, container string) string {
	t.Helper()
	var out string
	framework.Eventually(t, 30*time.Second, 300*time.Millisecond, func() bool {
		o, err := c.KubectlOut(t, 20*time.Second, "-n", ns, "logs", pod, "-c", container)
		out = o
		return err == nil && strings.Contains(o, "END\n")
	}, "output of %s/%s", pod, container)
	return out
}

func mustContain(t *testing.T, what, out string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(out, s) {
			t.Errorf("%s: missing %q in:\n%s", what, s, out)
		}
	}
}

func waitingReason(p *v1.Pod, reason, msg string) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason == reason && strings.Contains(w.Message, msg) {
			return true
		}
	}
	return false
}

// TestPodSecurityNamesAndDNS reads from inside containers what the
// security context, /etc/hosts, the resolver and the hostname became.
func TestPodSecurityNamesAndDNS(t *testing.T) {
	const node = "security-node"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, node)
	n.AppendConfig("clusterDomain: cluster.local\nclusterDNS: [10.96.0.10]\n")
	// A Localhost seccomp profile that denies mkdir.
	if err := os.MkdirAll(filepath.Join(n.RootDir, "seccomp"), 0o755); err != nil {
		t.Fatal(err)
	}
	profile := `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`
	if err := os.WriteFile(filepath.Join(n.RootDir, "seccomp", "no-mkdir.json"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	n.Start()
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool { return c.NodeReady(t, node) == v1.ConditionTrue }, "node Ready")
	ns := c.Namespace(t, "security")
	ctx := context.Background()
	create := func(p *v1.Pod) {
		t.Helper()
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const report = `id; grep -E '^(Seccomp|NoNewPrivs|CapBnd):' /proc/self/status; (touch /x 2>/dev/null && echo RW) || echo ROFS; ` +
		`echo HOSTS; cat /etc/hosts; echo RESOLV; cat /etc/resolv.conf; echo HOSTNAME $(hostname); ` +
		`echo PORTSTART $(cat /proc/sys/net/ipv4/ip_unprivileged_port_start); echo END; sleep 3600`

	sec := busyboxPod("sec", node, report)
	sec.Spec.Hostname, sec.Spec.Subdomain = "h1", "sub"
	sec.Spec.HostAliases = []v1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"alias-a", "alias-b"}}}
	sec.Spec.DNSConfig = &v1.PodDNSConfig{Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}}}
	sec.Spec.SecurityContext = &v1.PodSecurityContext{
		RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](3000), SupplementalGroups: []int64{4000},
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
		Sysctls:        []v1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "80"}},
	}
	sec.Spec.Containers[0].SecurityContext = &v1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &v1.Capabilities{Drop: []v1.Capability{"ALL"}, Add: []v1.Capability{"NET_BIND_SERVICE"}},
	}
	create(sec)

	fqdn := busyboxPod("fqdn", node, report)
	fqdn.Spec.Subdomain, fqdn.Spec.SetHostnameAsFQDN = "sub", ptr.To(true)
	fqdn.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}}
	create(fqdn)

	shared := busyboxPod("shared", node, "exec sleep 4242")
	shared.Spec.ShareProcessNamespace = ptr.To(true)
	shared.Spec.Containers = append(shared.Spec.Containers, v1.Container{Name: "peek", Image: busybox,
		Command: []string{"sh", "-c", `sleep 1; ps; echo END; sleep 3600`}})
	create(shared)

	hostnet := busyboxPod("hostnet", node, `echo HOSTS; cat /etc/hosts; echo LINKS; ip link; echo PID1 $(cat /proc/1/comm); echo IPC $(readlink /proc/self/ns/ipc); echo END; sleep 3600`)
	hostnet.Spec.HostNetwork, hostnet.Spec.HostPID, hostnet.Spec.HostIPC = true, true, true
	hostnet.Spec.DNSPolicy = v1.DNSClusterFirstWithHostNet
	create(hostnet)

	local := busyboxPod("localseccomp", node, `mkdir /tmp/x 2>&1 || echo MKDIR-DENIED; grep Seccomp: /proc/self/status; echo END; sleep 3600`)
	local.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{
		Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("no-mkdir.json")}}
	create(local)
	privileged := busyboxPod("privileged", node, `grep CapEff /proc/self/status; echo END; sleep 3600`)
	privileged.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
	create(privileged)

	rootImage := busyboxPod("rootimage", node, "sleep 3600")
	rootImage.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
	create(rootImage)
	rootUser := busyboxPod("rootuser", node, "sleep 3600")
	rootUser.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)}
	create(rootUser)
	// The API server refuses a RuntimeClass that does not exist; one whose
	// handler the runtime does not have reaches nodelet, which reports the
	// runtime's refusal.
	noClass := busyboxPod("no-class", node, "sleep 3600")
	noClass.Spec.RuntimeClassName = ptr.To("no-such-class")
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, noClass, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("pod with a RuntimeClass that does not exist: %v", err)
	}
	rcName := ns + "-nohandler"
	if _, err := c.Client.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: rcName}, Handler: "no-such-handler"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.NodeV1().RuntimeClasses().Delete(context.Background(), rcName, metav1.DeleteOptions{})
	})
	unknownRC := busyboxPod("unknown-rc", node, "sleep 3600")
	unknownRC.Spec.RuntimeClassName = ptr.To(rcName)
	create(unknownRC)

	for _, name := range []string{"sec", "fqdn", "shared", "hostnet", "localseccomp", "privileged"} {
		waitPod(t, c, ns, name, 60*time.Second, "Ready", podReady)
	}
	p := c.Pod(t, ns, "sec")
	out := podOutput(t, c, ns, "sec", "c")
	mustContain(t, "sec", out,
		"uid=1000 gid=3000", "4000", "Seccomp:\t2", "NoNewPrivs:\t1", "CapBnd:\t0000000000000400", "ROFS",
		"# Kubernetes-managed hosts file.", p.Status.PodIP+"\th1.sub."+ns+".svc.cluster.local\th1",
		"# Entries added by HostAliases.\n10.1.2.3\talias-a\talias-b",
		"nameserver 10.96.0.10", "search "+ns+".svc.cluster.local svc.cluster.local cluster.local", "ndots:2",
		"HOSTNAME h1\n", "PORTSTART 80\n")
	out = podOutput(t, c, ns, "fqdn", "c")
	mustContain(t, "fqdn", out, "HOSTNAME fqdn.sub."+ns+".svc.cluster.local\n", "Seccomp:\t0", "uid=0(root)", "ndots:5")
	out = podOutput(t, c, ns, "shared", "peek")
	mustContain(t, "shareProcessNamespace", out, "sleep 4242")
	out = podOutput(t, c, ns, "hostnet", "c")
	mustContain(t, "hostNetwork/hostPID", out, "(host network)", "nodelet0")
	if strings.Contains(out, "PID1 sh") || strings.Contains(out, "PID1 sleep") {
		t.Errorf("hostPID: PID 1 is the container's own: %s", out)
	}
	if hostIPC, _ := os.Readlink("/proc/self/ns/ipc"); hostIPC == "" || !strings.Contains(out, "IPC "+hostIPC+"\n") {
		t.Errorf("hostIPC: want the host's %s in:\n%s", hostIPC, out)
	}
	mustContain(t, "Localhost seccomp", podOutput(t, c, ns, "localseccomp", "c"), "MKDIR-DENIED", "Seccomp:\t2")
	mustContain(t, "privileged", podOutput(t, c, ns, "privileged", "c"), "CapEff:\t000001f") // all the capabilities this host has (it lacks CAP_SYS_RESOURCE)

	waitPod(t, c, ns, "rootimage", 30*time.Second, "refused", func(p *v1.Pod) bool {
		return waitingReason(p, "CreateContainerConfigError", "container has runAsNonRoot and image will run as root")
	})
	waitPod(t, c, ns, "rootuser", 30*time.Second, "refused", func(p *v1.Pod) bool {
		return waitingReason(p, "CreateContainerConfigError", "container's runAsUser breaks non-root policy")
	})
	framework.Eventually(t, 30*time.Second, 500*time.Millisecond, func() bool {
		evs, _ := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=unknown-rc"})
		for _, e := range evs.Items {
			if e.Reason == "FailedCreatePodSandBox" && strings.Contains(e.Message, "no-such-handler") {
				return true
			}
		}
		return false
	}, "FailedCreatePodSandBox for the RuntimeClass with an unknown handler")
	if p := c.Pod(t, ns, "unknown-rc"); p.Status.Phase != v1.PodPending {
		t.Errorf("pod with an unknown RuntimeClass: phase %s", p.Status.Phase)
	}
}

// TestPodLifecycleDetails: activeDeadlineSeconds (and shortening it on a
// running pod), terminationMessagePath and FallbackToLogsOnError, and an
// ephemeral container added with kubectl debug.
func TestPodLifecycleDetails(t *testing.T) {
	const node = "lifecycle-node"
	c, _ := clusterNode(t, node, "")
	ns := c.Namespace(t, "lifecycle")
	ctx := context.Background()
	create := func(p *v1.Pod) {
		t.Helper()
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := busyboxPod("deadline", node, "sleep 3600")
	deadline.Spec.ActiveDeadlineSeconds = ptr.To[int64](4)
	create(deadline)
	later := busyboxPod("later", node, "sleep 3600")
	later.Spec.ActiveDeadlineSeconds = ptr.To[int64](600)
	create(later)
	logs := busyboxPod("fallback", node, `echo first line; echo boom-from-logs; exit 3`)
	logs.Spec.RestartPolicy = v1.RestartPolicyNever
	logs.Spec.Containers[0].TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	create(logs)
	file := busyboxPod("msgfile", node, `echo from-the-file > /tmp/why; echo not-this; exit 4`)
	file.Spec.RestartPolicy = v1.RestartPolicyNever
	file.Spec.Containers[0].TerminationMessagePath = "/tmp/why"
	file.Spec.Containers[0].TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	create(file)
	target := busyboxPod("target", node, "exec sleep 3131")
	create(target)
	gated := busyboxPod("gated", node, "sleep 3600")
	gated.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/gate"}}
	create(gated)

	start := time.Now()
	waitPod(t, c, ns, "deadline", 30*time.Second, "Failed DeadlineExceeded", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == "DeadlineExceeded"
	})
	t.Logf("activeDeadlineSeconds 4: Failed/DeadlineExceeded %v after creation", time.Since(start).Round(100*time.Millisecond))
	// sleep ignores SIGTERM: the container stops after its 10 s grace.
	waitPod(t, c, ns, "deadline", 30*time.Second, "container stopped", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return p.Status.Phase == v1.PodFailed && len(cs) == 1 && cs[0].State.Terminated != nil
	})
	waitPod(t, c, ns, "later", 60*time.Second, "Running", podReady)
	patch := []byte(`{"spec":{"activeDeadlineSeconds":2}}`)
	if _, err := c.Client.CoreV1().Pods(ns).Patch(ctx, "later", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "later", 20*time.Second, "Failed after the deadline was shortened", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == "DeadlineExceeded"
	})

	p := waitPod(t, c, ns, "fallback", 60*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if term := p.Status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 3 || !strings.Contains(term.Message, "boom-from-logs") {
		t.Errorf("FallbackToLogsOnError: %+v", term)
	}
	p = waitPod(t, c, ns, "msgfile", 60*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if term := p.Status.ContainerStatuses[0].State.Terminated; term == nil || strings.TrimSpace(term.Message) != "from-the-file" {
		t.Errorf("terminationMessagePath: %+v", term)
	}

	// A readiness gate holds Ready back until its condition is True.
	waitPod(t, c, ns, "gated", 60*time.Second, "Running, Ready false for its gate", func(p *v1.Pod) bool {
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodReady {
				return p.Status.Phase == v1.PodRunning && cond.Status == v1.ConditionFalse && cond.Reason == "ReadinessGatesNotReady"
			}
		}
		return false
	})
	gatePatch := []byte(`{"status":{"conditions":[{"type":"example.com/gate","status":"True"}]}}`)
	if _, err := c.Client.CoreV1().Pods(ns).Patch(ctx, "gated", types.StrategicMergePatchType, gatePatch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	gateAt := time.Now()
	waitPod(t, c, ns, "gated", 20*time.Second, "Ready once the gate is True", podReady)
	t.Logf("Ready %v after the readiness gate's condition turned True", time.Since(gateAt).Round(10*time.Millisecond))

	// kubectl debug adds an ephemeral container sharing the target's
	// process namespace.
	waitPod(t, c, ns, "target", 60*time.Second, "Running", podReady)
	if out, err := c.KubectlOut(t, 30*time.Second, "-n", ns, "debug", "target", "-c", "dbg", "--image="+busybox,
		"--target=c", "--", "sh", "-c", "ps; echo END; sleep 3600"); err != nil {
		t.Fatalf("kubectl debug: %v %s", err, out)
	}
	p = waitPod(t, c, ns, "target", 60*time.Second, "ephemeral container running", func(p *v1.Pod) bool {
		es := p.Status.EphemeralContainerStatuses
		return len(es) == 1 && es[0].Name == "dbg" && es[0].State.Running != nil
	})
	if p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Error("the target restarted")
	}
	mustContain(t, "ephemeral container", podOutput(t, c, ns, "target", "dbg"), "sleep 3131")
	if b, _ := json.Marshal(p.Status.EphemeralContainerStatuses); !strings.Contains(string(b), "containerd://") {
		t.Errorf("ephemeral status without a container ID: %s", b)
	}
}

// TestRuntimeClassSecondHandler: a RuntimeClass whose handler is the stack
// containerd's second one (SECOND_RUNTIME_HANDLER: Debian's runc on
// containerd 2, crun on containerd 1.6) runs the pod's sandbox with that
// handler, and its overhead is added to the pod's cgroup limit.
func TestRuntimeClassSecondHandler(t *testing.T) {
	const node = "crun-node"
	c, _ := clusterNode(t, node, "")
	handler := c.Env["SECOND_RUNTIME_HANDLER"]
	if handler == "" {
		t.Fatal(".stack/env lacks SECOND_RUNTIME_HANDLER: run make stack-up")
	}
	ns := c.Namespace(t, "crun")
	ctx := context.Background()
	rcName := ns + "-second"
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: rcName}, Handler: handler,
		Overhead: &nodev1.Overhead{PodFixed: v1.ResourceList{v1.ResourceMemory: resource.MustParse("16Mi"), v1.ResourceCPU: resource.MustParse("50m")}}}
	if _, err := c.Client.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.NodeV1().RuntimeClasses().Delete(context.Background(), rcName, metav1.DeleteOptions{})
	})
	p := busyboxPod("fast", node, "sleep 3600")
	p.Spec.RuntimeClassName = ptr.To(rcName)
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi"), v1.ResourceCPU: resource.MustParse("100m")},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, c, ns, "fast", 60*time.Second, "Ready", podReady)
	if got.Spec.Overhead.Memory().String() != "16Mi" {
		t.Fatalf("the API server did not set the overhead: %v", got.Spec.Overhead)
	}
	boxes, err := c.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(got.UID)}})
	if err != nil || len(boxes) != 1 {
		t.Fatalf("sandboxes: %v %v", boxes, err)
	}
	st, err := c.Runtime.PodSandboxStatus(ctx, boxes[0].Id, true)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		RuntimeHandler string `json:"runtimeHandler"`
	}
	// The CRI status field (containerd 2), else the verbose info
	// (containerd 1.6).
	if h := st.GetStatus().GetRuntimeHandler(); h != "" {
		info.RuntimeHandler = h
	} else if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil {
		t.Fatalf("sandbox info: %v", err)
	}
	if info.RuntimeHandler != handler {
		t.Fatalf("sandbox runtime handler %q, want %q", info.RuntimeHandler, handler)
	}
	// The pod cgroup's memory limit is the container's plus the overhead.
	limit := readInt(t, filepath.Join("/sys/fs/cgroup/memory/kubepods/pod"+string(got.UID), "memory.limit_in_bytes"))
	if limit != 80<<20 {
		t.Fatalf("pod cgroup memory limit %v, want 80Mi (64Mi + 16Mi overhead)", limit)
	}
}

// TestSeccompDefault: with seccompDefault: true, a container without a
// seccomp profile of its own or its pod's runs with the runtime's default
// profile (Seccomp: 2, filtered), one that asks for Unconfined does not
// (0), and a privileged one stays unconfined; the pod sandbox (its pause
// process) always runs with RuntimeDefault, as upstream's.
func TestSeccompDefault(t *testing.T) {
	const node = "seccomp-default-node"
	c, _ := clusterNode(t, node, "seccompDefault: true\n")
	ns := c.Namespace(t, "seccomp-default")
	ctx := context.Background()
	const report = `grep Seccomp: /proc/self/status; echo END; sleep 3600`
	plain := busyboxPod("plain", node, report)
	unconfined := busyboxPod("unconfined", node, report)
	unconfined.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}}
	podUnconfined := busyboxPod("pod-unconfined", node, report)
	podUnconfined.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}}
	privileged := busyboxPod("privileged", node, report)
	privileged.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
	for _, p := range []*v1.Pod{plain, unconfined, podUnconfined, privileged} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{"plain": "Seccomp:\t2", "unconfined": "Seccomp:\t0", "pod-unconfined": "Seccomp:\t0", "privileged": "Seccomp:\t0"} {
		waitPod(t, c, ns, name, 60*time.Second, "Ready", podReady)
		mustContain(t, name, podOutput(t, c, ns, name, "c"), want)
	}
	// The sandbox of the pod that asked for Unconfined: its pause process
	// is filtered all the same.
	p := c.Pod(t, ns, "pod-unconfined")
	{
		pid := sandboxPid(t, c, string(p.UID))
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		mustContain(t, "the sandbox's pause process", string(status), "Seccomp:\t2")
	}
}
