package kuberuntime

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/podspec"
)

const (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	created = runtimeapi.ContainerState_CONTAINER_CREATED
)

func testPod(policy v1.RestartPolicy, inits []string, names ...string) *v1.Pod {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "p", "default", "uid-1"
	pod.Spec.RestartPolicy = policy
	for _, n := range inits {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n, Image: "busybox:1.36"})
	}
	for _, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: "busybox:1.36"})
	}
	podspec.SetDefaults(pod)
	return pod
}

func readySandbox(id string, attempt uint32) *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{
		Id: id, State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Metadata: &runtimeapi.PodSandboxMetadata{Attempt: attempt},
		Network:  &runtimeapi.PodSandboxNetworkStatus{Ip: "10.88.0.9"},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD},
		}},
	}
}

func deadSandbox(id string, attempt uint32) *runtimeapi.PodSandboxStatus {
	s := readySandbox(id, attempt)
	s.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	return s
}

// cs builds a container status in sandbox "s1" with the spec's hash.
func cs(pod *v1.Pod, name string, state runtimeapi.ContainerState, exit int32) *kubecontainer.ContainerStatus {
	c := &kubecontainer.ContainerStatus{ID: name + "-id", Name: name, State: state, ExitCode: exit, SandboxID: "s1"}
	if spec := specContainer(pod, name); spec != nil {
		c.Hash = podspec.ContainerHash(spec)
	}
	return c
}

func podStatus(sandboxes []*runtimeapi.PodSandboxStatus, containers ...*kubecontainer.ContainerStatus) *kubecontainer.PodStatus {
	s := &kubecontainer.PodStatus{Sandboxes: sandboxes, Containers: containers}
	if s.SandboxReady() {
		s.IPs = sandboxIPs(sandboxes[0])
	}
	return s
}

func TestComputePodActions(t *testing.T) {
	always := testPod(v1.RestartPolicyAlways, nil, "a", "b")
	onFailure := testPod(v1.RestartPolicyOnFailure, nil, "a", "b")
	never := testPod(v1.RestartPolicyNever, nil, "a", "b")
	withInit := testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a")
	initNever := testPod(v1.RestartPolicyNever, []string{"i1", "i2"}, "a")
	initOnFailure := testPod(v1.RestartPolicyOnFailure, []string{"i1"}, "a")
	ready := []*runtimeapi.PodSandboxStatus{readySandbox("s1", 0)}
	// Container restart rules: b restarts on exit code 42 only, in a Never pod.
	rules := testPod(v1.RestartPolicyNever, nil, "a", "b")
	neverC, alwaysC := v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyAlways
	rules.Spec.Containers[0].RestartPolicy = &alwaysC
	rules.Spec.Containers[1].RestartPolicy = &neverC
	rules.Spec.Containers[1].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	// In an Always pod, b's own policy is Never.
	ownNever := testPod(v1.RestartPolicyAlways, nil, "a", "b")
	ownNever.Spec.Containers[1].RestartPolicy = &neverC
	changed := always.DeepCopy()
	changed.Spec.Containers[1].Image = "busybox:1.37"

	tests := []struct {
		name   string
		pod    *v1.Pod
		status *kubecontainer.PodStatus
		probes ProbeResults
		want   podActions
	}{
		{
			name:   "a failed liveness probe restarts the container",
			pod:    always,
			status: podStatus(ready, cs(always, "a", running, 0), cs(always, "b", running, 0)),
			probes: unhealthy{"b-id": "Container b failed liveness probe, will be restarted"},
			want: podActions{SandboxID: "s1", ContainersToStart: []int{1},
				ContainersToKill: map[string]killReason{"b-id": {name: "b", message: "Container b failed liveness probe, will be restarted"}}},
		},
		{
			name:   "a failed liveness probe under Never kills without restart",
			pod:    never,
			status: podStatus(ready, cs(never, "a", running, 0), cs(never, "b", running, 0)),
			probes: unhealthy{"a-id": "Container a failed liveness probe"},
			want: podActions{SandboxID: "s1",
				ContainersToKill: map[string]killReason{"a-id": {name: "a", message: "Container a failed liveness probe"}}},
		},
		{
			name:   "container restart rules: a container Always and a rule matching",
			pod:    rules,
			status: podStatus(ready, cs(rules, "a", exited, 0), cs(rules, "b", exited, 42)),
			want:   podActions{SandboxID: "s1", ContainersToStart: []int{0, 1}},
		},
		{
			name:   "container restart rules: no rule matching, container Never",
			pod:    rules,
			status: podStatus(ready, cs(rules, "a", running, 0), cs(rules, "b", exited, 1)),
			want:   podActions{SandboxID: "s1"},
		},
		{
			name:   "a new sandbox does not rerun a container whose own policy is Never",
			pod:    ownNever,
			status: podStatus([]*runtimeapi.PodSandboxStatus{deadSandbox("s1", 0)}, cs(ownNever, "a", exited, 0), cs(ownNever, "b", exited, 1)),
			want:   podActions{KillPod: true, CreateSandbox: true, Attempt: 1, SandboxID: "s1", ContainersToStart: []int{0}},
		},
		{
			name:   "new pod: create the sandbox and start every container",
			pod:    always,
			status: podStatus(nil),
			want:   podActions{KillPod: true, CreateSandbox: true, Attempt: 0, ContainersToStart: []int{0, 1}},
		},
		{
			name:   "all running: nothing to do",
			pod:    always,
			status: podStatus(ready, cs(always, "a", running, 0), cs(always, "b", running, 0)),
			want:   podActions{SandboxID: "s1"},
		},
		{
			name:   "Always restarts a container that exited 0",
			pod:    always,
			status: podStatus(ready, cs(always, "a", running, 0), cs(always, "b", exited, 0)),
			want:   podActions{SandboxID: "s1", ContainersToStart: []int{1}},
		},
		{
			name:   "OnFailure restarts only the failed container",
			pod:    onFailure,
			status: podStatus(ready, cs(onFailure, "a", exited, 0), cs(onFailure, "b", exited, 2)),
			want:   podActions{SandboxID: "s1", ContainersToStart: []int{1}},
		},
		{
			name:   "OnFailure with everything succeeded stops the sandbox",
			pod:    onFailure,
			status: podStatus(ready, cs(onFailure, "a", exited, 0), cs(onFailure, "b", exited, 0)),
			want:   podActions{SandboxID: "s1", KillPod: true},
		},
		{
			name:   "Never restarts nothing and stops the sandbox once all exited",
			pod:    never,
			status: podStatus(ready, cs(never, "a", exited, 1), cs(never, "b", exited, 0)),
			want:   podActions{SandboxID: "s1", KillPod: true},
		},
		{
			name:   "Never keeps the running one, does not restart the failed one",
			pod:    never,
			status: podStatus(ready, cs(never, "a", running, 0), cs(never, "b", exited, 1)),
			want:   podActions{SandboxID: "s1"},
		},
		{
			// Upstream's "should not create extra sandbox if all containers
			// are done".
			name:   "OnFailure with init containers, all done, sandbox stopped: no new sandbox",
			pod:    initOnFailure,
			status: podStatus([]*runtimeapi.PodSandboxStatus{deadSandbox("s1", 0)}, cs(initOnFailure, "i1", exited, 0), cs(initOnFailure, "a", exited, 0)),
			want:   podActions{KillPod: true, Attempt: 1, SandboxID: "s1"},
		},
		{
			name:   "OnFailure with init containers, the app failed, sandbox gone: init again",
			pod:    initOnFailure,
			status: podStatus([]*runtimeapi.PodSandboxStatus{deadSandbox("s1", 0)}, cs(initOnFailure, "i1", exited, 0), cs(initOnFailure, "a", exited, 1)),
			want:   podActions{KillPod: true, CreateSandbox: true, Attempt: 1, SandboxID: "s1", NextInitContainer: &initOnFailure.Spec.InitContainers[0]},
		},
		{
			name:   "Never with a dead sandbox after running: no new sandbox",
			pod:    never,
			status: podStatus([]*runtimeapi.PodSandboxStatus{deadSandbox("s1", 0)}, cs(never, "a", exited, 0)),
			want:   podActions{KillPod: true, Attempt: 1, SandboxID: "s1"},
		},
		{
			name:   "Always with a dead sandbox: new sandbox with the next attempt",
			pod:    always,
			status: podStatus([]*runtimeapi.PodSandboxStatus{deadSandbox("s1", 0)}, cs(always, "a", exited, 0)),
			want:   podActions{KillPod: true, CreateSandbox: true, Attempt: 1, SandboxID: "s1", ContainersToStart: []int{0, 1}},
		},
		{
			name:   "changed spec hash: kill and restart that container",
			pod:    changed,
			status: podStatus(ready, cs(always, "a", running, 0), cs(always, "b", running, 0)),
			want: podActions{SandboxID: "s1", ContainersToStart: []int{1},
				ContainersToKill: map[string]killReason{"b-id": {name: "b", message: "Container b definition changed"}}},
		},
		{
			name:   "a created-but-never-started container is replaced",
			pod:    always,
			status: podStatus(ready, cs(always, "a", running, 0), cs(always, "b", created, 0)),
			want: podActions{SandboxID: "s1", ContainersToStart: []int{1},
				ContainersToKill: map[string]killReason{"b-id": {name: "b", message: "Container is in an unknown state"}}},
		},
		{
			name:   "a running container the spec lacks is killed",
			pod:    testPod(v1.RestartPolicyAlways, nil, "a"),
			status: podStatus(ready, cs(always, "a", running, 0), cs(always, "old", running, 0)),
			want: podActions{SandboxID: "s1",
				ContainersToKill: map[string]killReason{"old-id": {name: "old", message: "Container is not in the pod spec"}}},
		},
		{
			name:   "new pod with init containers: the first init container only",
			pod:    withInit,
			status: podStatus(nil),
			want:   podActions{KillPod: true, CreateSandbox: true, NextInitContainer: &withInit.Spec.InitContainers[0]},
		},
		{
			name:   "init containers run in order",
			pod:    withInit,
			status: podStatus(ready, cs(withInit, "i1", exited, 0)),
			want:   podActions{SandboxID: "s1", NextInitContainer: &withInit.Spec.InitContainers[1]},
		},
		{
			name:   "a running init container is waited for",
			pod:    withInit,
			status: podStatus(ready, cs(withInit, "i1", exited, 0), cs(withInit, "i2", running, 0)),
			want:   podActions{SandboxID: "s1"},
		},
		{
			name:   "a failed init container is retried under Always",
			pod:    withInit,
			status: podStatus(ready, cs(withInit, "i1", exited, 0), cs(withInit, "i2", exited, 1)),
			want:   podActions{SandboxID: "s1", NextInitContainer: &withInit.Spec.InitContainers[1]},
		},
		{
			name:   "a failed init container fails the pod under Never",
			pod:    initNever,
			status: podStatus(ready, cs(initNever, "i1", exited, 3)),
			want:   podActions{SandboxID: "s1", InitFailed: true, KillPod: true},
		},
		{
			name:   "init done: app containers start",
			pod:    withInit,
			status: podStatus(ready, cs(withInit, "i1", exited, 0), cs(withInit, "i2", exited, 0)),
			want:   podActions{SandboxID: "s1", ContainersToStart: []int{0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := computePodActions(tt.pod, tt.status, tt.probes, nil)
			want := tt.want
			if want.ContainersToKill == nil {
				want.ContainersToKill = map[string]killReason{}
			}
			if got.KillPod != want.KillPod || got.CreateSandbox != want.CreateSandbox || got.Attempt != want.Attempt ||
				got.SandboxID != want.SandboxID || got.InitFailed != want.InitFailed ||
				got.NextInitContainer != want.NextInitContainer ||
				!equalInts(got.ContainersToStart, want.ContainersToStart) || !equalKills(got.ContainersToKill, want.ContainersToKill) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

type unhealthy map[string]string

// Unhealthy gives the reason in the map; "not-started" is a startup probe
// that has not passed (nor failed) yet.
func (u unhealthy) Unhealthy(id string) (string, *int64) {
	if u[id] == "not-started" {
		return "", nil
	}
	return u[id], nil
}
func (u unhealthy) Started(id string) bool {
	return u[id] != "not-started" && u[id] != "failed startup"
}

// sidecarPod has init containers i1 (regular), sc (a sidecar), i2
// (regular) and app container a.
func sidecarPod(policy v1.RestartPolicy) *v1.Pod {
	p := testPod(policy, []string{"i1", "sc", "i2"}, "a")
	always := v1.ContainerRestartPolicyAlways
	p.Spec.InitContainers[1].RestartPolicy = &always
	return p
}

func TestComputePodActionsSidecars(t *testing.T) {
	ready := []*runtimeapi.PodSandboxStatus{readySandbox("s1", 0)}
	always, never := sidecarPod(v1.RestartPolicyAlways), sidecarPod(v1.RestartPolicyNever)
	tests := []struct {
		name     string
		pod      *v1.Pod
		status   *kubecontainer.PodStatus
		probes   ProbeResults
		next     string
		sidecar  bool
		start    []int
		sidecars []int
		kill     []string
		killPod  bool
	}{
		{name: "after i1 the sidecar starts", pod: always,
			status: podStatus(ready, cs(always, "i1", exited, 0)), next: "sc", sidecar: true},
		{name: "a running sidecar lets i2 start", pod: always,
			status: podStatus(ready, cs(always, "i1", exited, 0), cs(always, "sc", running, 0)), next: "i2"},
		{name: "a sidecar whose startup probe has not passed holds i2 back", pod: always,
			status: podStatus(ready, cs(always, "i1", exited, 0), cs(always, "sc", running, 0)),
			probes: unhealthy{"sc-id": "not-started"}},
		{name: "a sidecar failing its startup probe during init is restarted", pod: always,
			status: podStatus(ready, cs(always, "i1", exited, 0), cs(always, "sc", running, 0)),
			probes: unhealthy{"sc-id": "failed startup"}, next: "sc", sidecar: true, kill: []string{"sc-id"}},
		{name: "a started sidecar failing liveness during init is restarted", pod: always,
			status: podStatus(ready, cs(always, "i1", exited, 0), cs(always, "sc", running, 0), cs(always, "i2", running, 0)),
			probes: unhealthy{"sc-id": "failed liveness"}, next: "sc", sidecar: true, kill: []string{"sc-id"}},
		{name: "a sidecar that exits during init is restarted", pod: always,
			status: podStatus(ready, cs(always, "i1", exited, 0), cs(always, "sc", exited, 1)), next: "sc", sidecar: true},
		{name: "init done: the app starts, the sidecar keeps running", pod: always,
			status: podStatus(ready, cs(always, "i1", exited, 0), cs(always, "sc", running, 0), cs(always, "i2", exited, 0)),
			start:  []int{0}},
		{name: "a sidecar that exits later is restarted even with restartPolicy Never", pod: never,
			status:   podStatus(ready, cs(never, "i1", exited, 0), cs(never, "sc", exited, 0), cs(never, "i2", exited, 0), cs(never, "a", running, 0)),
			sidecars: []int{1}},
		{name: "a sidecar failing liveness is restarted", pod: always,
			status: podStatus(ready, cs(always, "i1", exited, 0), cs(always, "sc", running, 0), cs(always, "i2", exited, 0), cs(always, "a", running, 0)),
			probes: unhealthy{"sc-id": "failed liveness"}, sidecars: []int{1}, kill: []string{"sc-id"}},
		{name: "app done under Never: the pod (and its sidecar) stop", pod: never,
			status:  podStatus(ready, cs(never, "i1", exited, 0), cs(never, "sc", running, 0), cs(never, "i2", exited, 0), cs(never, "a", exited, 0)),
			killPod: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := computePodActions(tt.pod, tt.status, tt.probes, nil)
			next := ""
			if got.NextInitContainer != nil {
				next = got.NextInitContainer.Name
			}
			var kills []string
			for id := range got.ContainersToKill {
				kills = append(kills, id)
			}
			if next != tt.next || got.SidecarStarted != tt.sidecar || !equalInts(got.ContainersToStart, tt.start) ||
				!equalInts(got.SidecarsToStart, tt.sidecars) || got.KillPod != tt.killPod || len(kills) != len(tt.kill) ||
				(len(kills) == 1 && kills[0] != tt.kill[0]) {
				t.Errorf("got next=%q sidecar=%v start=%v sidecars=%v kill=%v killPod=%v", next, got.SidecarStarted,
					got.ContainersToStart, got.SidecarsToStart, kills, got.KillPod)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalKills(a, b map[string]killReason) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestRestartAllContainers(t *testing.T) {
	// init, sidecar, source (restartPolicy Never, RestartAllContainers on
	// exit code 42), regular: upstream's e2e pod.
	pod := testPod(v1.RestartPolicyNever, []string{"init", "sidecar"}, "source", "regular")
	alwaysC, neverC := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyNever
	pod.Spec.InitContainers[1].RestartPolicy = &alwaysC
	pod.Spec.Containers[0].RestartPolicy = &neverC
	pod.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	ready := []*runtimeapi.PodSandboxStatus{readySandbox("s1", 0)}
	withSource := func(exitSource int32, state runtimeapi.ContainerState) *kubecontainer.PodStatus {
		return podStatus(ready, cs(pod, "init", exited, 0), cs(pod, "sidecar", running, 0),
			cs(pod, "source", state, exitSource), cs(pod, "regular", running, 0))
	}
	tests := []struct {
		name    string
		status  *kubecontainer.PodStatus
		want    []string
		wantNew bool // the pod's normal actions (nothing to restart)
	}{
		{name: "source exited 42: restart all", status: withSource(42, exited), want: []string{"source"}},
		{name: "another exit code: the container's own policy (Never)", status: withSource(1, exited)},
		{name: "source running", status: withSource(0, runtimeapi.ContainerState_CONTAINER_RUNNING)},
		{name: "after the reset (nothing left): init from the first", status: podStatus(ready), wantNew: true},
		{name: "a new sandbox: as ever", status: podStatus([]*runtimeapi.PodSandboxStatus{deadSandbox("s1", 0)},
			cs(pod, "source", exited, 42))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := computePodActions(pod, tt.status, nil, nil)
			if strings.Join(got.RestartAll, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("RestartAll %v, want %v", got.RestartAll, tt.want)
			}
			if tt.wantNew && (got.NextInitContainer == nil || got.NextInitContainer.Name != "init") {
				t.Errorf("next init container %v, want init", got.NextInitContainer)
			}
		})
	}
	if got := strings.Join(RestartAllOrder(pod, []string{"source"}), ","); got != "regular,sidecar,init,source" {
		t.Errorf("order %s, want the others in reverse, the source last", got)
	}
	if got := strings.Join(RestartAllOrder(pod, []string{"init", "regular"}), ","); got != "source,sidecar,regular,init" {
		t.Errorf("order %s", got)
	}
}
