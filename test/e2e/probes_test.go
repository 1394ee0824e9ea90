package e2e

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

func execProbe(cmd ...string) v1.ProbeHandler {
	return v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}
}

func probe(h v1.ProbeHandler, period, failures int32) *v1.Probe {
	return &v1.Probe{ProbeHandler: h, PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 1}
}

func restarts(p *v1.Pod) int32 {
	if len(p.Status.ContainerStatuses) == 0 {
		return 0
	}
	return p.Status.ContainerStatuses[0].RestartCount
}

func containerReady(p *v1.Pod) bool {
	return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
}

func TestProbes(t *testing.T) {
	name := "e2e-probes"
	c, _ := clusterNode(t, name, "")
	ns := c.Namespace(t, "probes")
	ctx := context.Background()
	create := func(p *v1.Pod) {
		t.Helper()
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const serve = "mkdir -p /www; echo ok > /www/healthz; "

	// Readiness that never passes: Running, never Ready, never restarted.
	never := busyboxPod("never-ready", name, "trap 'exit 0' TERM; while true; do sleep 0.2; done")
	never.Spec.Containers[0].ReadinessProbe = probe(execProbe("false"), 1, 1)
	create(never)
	// Readiness that passes once a file appears (after 3 s).
	later := busyboxPod("ready-later", name, "trap 'exit 0' TERM; sleep 3; touch /tmp/ready; while true; do sleep 0.2; done")
	later.Spec.Containers[0].ReadinessProbe = probe(execProbe("test", "-f", "/tmp/ready"), 1, 1)
	create(later)
	// An http liveness probe that starts failing after 3 s.
	live := busyboxPod("http-liveness", name, serve+"(sleep 3; rm /www/healthz) & exec httpd -f -p 8080 -h /www")
	live.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	live.Spec.Containers[0].LivenessProbe = probe(v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}, 1, 2)
	live.Spec.TerminationGracePeriodSeconds = new(int64)
	create(live)
	// An exec liveness probe that times out counts as a failure.
	slow := busyboxPod("exec-timeout", name, "trap 'exit 0' TERM; while true; do sleep 0.2; done")
	slow.Spec.Containers[0].LivenessProbe = probe(execProbe("sleep", "5"), 1, 1)
	slow.Spec.Containers[0].LivenessProbe.InitialDelaySeconds = 1
	create(slow)
	// A liveness kill uses the probe's own terminationGracePeriodSeconds
	// (2 s) instead of the pod's 60 s, for a container that ignores SIGTERM.
	pgrace := busyboxPod("probe-grace", name, "exec sleep 3600")
	pgrace.Spec.TerminationGracePeriodSeconds = ptr.To[int64](60)
	pgrace.Spec.Containers[0].LivenessProbe = probe(execProbe("false"), 1, 1)
	pgrace.Spec.Containers[0].LivenessProbe.InitialDelaySeconds = 2
	pgrace.Spec.Containers[0].LivenessProbe.TerminationGracePeriodSeconds = ptr.To[int64](2)
	create(pgrace)
	// A slow starter (6 s) with a strict liveness probe, protected by a
	// startup probe.
	starter := busyboxPod("slow-starter", name, "trap 'exit 0' TERM; sleep 6; touch /tmp/started; while true; do sleep 0.2; done")
	starter.Spec.Containers[0].StartupProbe = probe(execProbe("test", "-f", "/tmp/started"), 1, 15)
	starter.Spec.Containers[0].LivenessProbe = probe(execProbe("test", "-f", "/tmp/started"), 1, 1)
	create(starter)
	// tcp readiness: passes on a listening port; another never does.
	tcpOK := busyboxPod("tcp-ok", name, serve+"exec httpd -f -p 8081 -h /www")
	tcpOK.Spec.Containers[0].ReadinessProbe = probe(v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8081)}}, 1, 1)
	create(tcpOK)
	tcpBad := busyboxPod("tcp-bad", name, serve+"exec httpd -f -p 8082 -h /www")
	tcpBad.Spec.Containers[0].ReadinessProbe = probe(v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(9999)}}, 1, 1)
	create(tcpBad)
	// gRPC health probes: the overall service passes, "down" fails.
	grpcPod := func(podName string, service *string) *v1.Pod {
		p := busyboxPod(podName, name, "")
		p.Spec.Containers[0].Image = "docker.io/nodelet/grpc-health:1.0"
		p.Spec.Containers[0].Command = nil
		p.Spec.Containers[0].ReadinessProbe = probe(v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090, Service: service}}, 1, 1)
		return p
	}
	down := "down"
	create(grpcPod("grpc-ok", nil))
	create(grpcPod("grpc-down", &down))
	// initialDelaySeconds holds readiness back.
	delayed := busyboxPod("delayed", name, "trap 'exit 0' TERM; while true; do sleep 0.2; done")
	delayed.Spec.Containers[0].ReadinessProbe = probe(execProbe("true"), 1, 1)
	delayed.Spec.Containers[0].ReadinessProbe.InitialDelaySeconds = 6
	create(delayed)

	// The file appears 3 s after start; Ready follows within 2 s.
	p := waitPod(t, c, ns, "ready-later", 30*time.Second, "Ready", podReady)
	started := p.Status.ContainerStatuses[0].State.Running.StartedAt.Time
	for _, cond := range p.Status.Conditions {
		if cond.Type == v1.PodReady {
			if d := cond.LastTransitionTime.Sub(started); d < 2*time.Second || d > 6*time.Second {
				t.Errorf("ready-later became Ready %v after start, want ~3-5 s", d)
			}
		}
	}
	waitPod(t, c, ns, "http-liveness", 40*time.Second, "restarted by its failing liveness probe", func(p *v1.Pod) bool { return restarts(p) >= 2 })
	waitPod(t, c, ns, "exec-timeout", 40*time.Second, "restarted by its timing-out exec probe", func(p *v1.Pod) bool { return restarts(p) >= 1 })
	waitPod(t, c, ns, "probe-grace", 20*time.Second, "restarted within the probe's 2 s grace, not the pod's 60 s", func(p *v1.Pod) bool { return restarts(p) >= 1 })
	waitPod(t, c, ns, "tcp-ok", 30*time.Second, "Ready by tcp", podReady)
	waitPod(t, c, ns, "grpc-ok", 30*time.Second, "Ready by gRPC", podReady)
	p = waitPod(t, c, ns, "slow-starter", 40*time.Second, "Ready after its startup probe", podReady)
	if r := restarts(p); r != 0 {
		t.Errorf("the startup probe did not protect the slow starter: %d restarts", r)
	}
	if st := p.Status.ContainerStatuses[0]; st.Started == nil || !*st.Started {
		t.Errorf("slow-starter not reported started")
	}
	p = waitPod(t, c, ns, "delayed", 30*time.Second, "Ready after its initial delay", podReady)
	started = p.Status.ContainerStatuses[0].State.Running.StartedAt.Time
	for _, cond := range p.Status.Conditions {
		if cond.Type == v1.PodReady && cond.LastTransitionTime.Sub(started) < 5*time.Second {
			t.Errorf("delayed became Ready %v after start, before its 6 s initialDelaySeconds", cond.LastTransitionTime.Sub(started))
		}
	}
	for _, pn := range []string{"never-ready", "tcp-bad", "grpc-down"} {
		p := c.Pod(t, ns, pn)
		if p.Status.Phase != v1.PodRunning || podReady(p) || containerReady(p) || restarts(p) != 0 {
			t.Errorf("%s: phase %s ready %v restarts %d; want Running, unready, never restarted", pn, p.Status.Phase, podReady(p), restarts(p))
		}
	}
	evs, _ := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	var unhealthy, killing bool
	for _, e := range evs.Items {
		if e.Reason == "Unhealthy" && e.InvolvedObject.Name == "http-liveness" {
			unhealthy = true
		}
		if e.Reason == "Killing" && e.InvolvedObject.Name == "http-liveness" && e.Message == "Container c failed liveness probe, will be restarted" {
			killing = true
		}
	}
	if !unhealthy || !killing {
		t.Errorf("events: Unhealthy %v, Killing for the liveness failure %v", unhealthy, killing)
	}
	_ = framework.InCI
}
