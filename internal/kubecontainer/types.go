package kubecontainer

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodStatus is what the runtime has for one pod: its sandboxes and
// containers, newest first.
type PodStatus struct {
	UID       types.UID
	Name      string
	Namespace string
	// Sandboxes, newest first.
	Sandboxes []*runtimeapi.PodSandboxStatus
	// IPs of the newest ready sandbox.
	IPs []string
	// Containers of every sandbox, newest first.
	Containers []*ContainerStatus
}

// ContainerStatus is one container as the runtime reports it.
type ContainerStatus struct {
	ID           string
	Name         string
	SandboxID    string
	State        runtimeapi.ContainerState
	CreatedAt    time.Time
	StartedAt    time.Time
	FinishedAt   time.Time
	ExitCode     int32
	Reason       string
	Message      string
	Image        string
	ImageRef     string
	Attempt      uint32
	RestartCount int
	Hash         string
	// LogPath is the container's log file on the host.
	LogPath string
	// TerminationMessageHostPath is the host side of the termination
	// message file mounted into the container, if any.
	TerminationMessageHostPath string
	TerminationMessagePolicy   string
	// User is the identity the runtime runs the container's process with
	// (uid, gid, supplementary groups), when it says (containerd 2).
	User *v1.ContainerUser
	// Resources are the resources the runtime applied to the container
	// (CRI ContainerStatus.resources), nil when it does not say.
	Resources *ContainerResources
	// StopSignal is the signal the runtime stops the container with, when
	// it says and the ContainerStopSignals gate is on.
	StopSignal *v1.Signal
}

// Latest returns the newest status of the container named name, or nil.
func (s *PodStatus) Latest(name string) *ContainerStatus {
	for _, c := range s.Containers {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// LatestIn returns the newest status of the container named name in the
// sandbox with sandboxID, or nil.
func (s *PodStatus) LatestIn(name, sandboxID string) *ContainerStatus {
	for _, c := range s.Containers {
		if c.Name == name && c.SandboxID == sandboxID {
			return c
		}
	}
	return nil
}

// Previous returns the second newest status of the container named name.
func (s *PodStatus) Previous(name string) *ContainerStatus {
	seen := false
	for _, c := range s.Containers {
		if c.Name == name {
			if seen {
				return c
			}
			seen = true
		}
	}
	return nil
}

// SandboxReady reports whether the newest sandbox is ready.
func (s *PodStatus) SandboxReady() bool {
	return len(s.Sandboxes) > 0 && s.Sandboxes[0].GetState() == runtimeapi.PodSandboxState_SANDBOX_READY
}

// RunningPod is a pod as the runtime lists it: cheap to get for every pod at
// once (one ListPodSandbox and one ListContainers), enough to see changes and
// to stop it without its spec.
type RunningPod struct {
	UID       types.UID
	Name      string
	Namespace string
	// GracePeriod is the termination grace period the pod was started with,
	// read back from its containers' annotations (-1 when unknown).
	GracePeriod int64
	// PodIP is the sandbox's IP when known (for preStop httpGet hooks).
	PodIP      string
	Sandboxes  []*runtimeapi.PodSandbox
	Containers []*runtimeapi.Container
}

// Running reports whether anything of the pod still runs.
func (p *RunningPod) Running() bool {
	for _, s := range p.Sandboxes {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			return true
		}
	}
	for _, c := range p.Containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return true
		}
	}
	return false
}

// AnyRunning reports whether a container of the pod may still run: one
// running, created or of unknown state.
func (s *PodStatus) AnyRunning() bool {
	for _, c := range s.Containers {
		if c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			return true
		}
	}
	return false
}

// ContainerResources are a container's applied resources, as the runtime
// reports them (upstream's kubecontainer.ContainerResources): each nil
// when unknown.
type ContainerResources struct {
	CPURequest, CPULimit, MemoryLimit *resource.Quantity
	// MemoryRequest is no runtime's: the resources last actuated say it
	// (kuberuntime fills it from its actuated state, as upstream).
	MemoryRequest *resource.Quantity
}
