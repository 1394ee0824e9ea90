package kuberuntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodelet/nodelet/internal/rootdir"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageUsers tells which user an image runs as by default.
type ImageUsers interface {
	ImageUser(ctx context.Context, imageRef string) (uid *int64, username string, err error)
}

// verifyRunAsNonRoot enforces runAsNonRoot as upstream: the effective
// runAsUser, else the image's user, must be a known non-zero uid.
func (m *Manager) verifyRunAsNonRoot(ctx context.Context, pod *v1.Pod, c *v1.Container, imageRef string) error {
	var nonRoot *bool
	var user *int64
	if psc := pod.Spec.SecurityContext; psc != nil {
		nonRoot, user = psc.RunAsNonRoot, psc.RunAsUser
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsNonRoot != nil {
			nonRoot = csc.RunAsNonRoot
		}
		if csc.RunAsUser != nil {
			user = csc.RunAsUser
		}
	}
	if nonRoot == nil || !*nonRoot {
		return nil
	}
	if user != nil {
		if *user == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", pod.Namespace+"/"+pod.Name, c.Name)
		}
		return nil
	}
	users, ok := m.cfg.Images.(ImageUsers)
	if !ok {
		return fmt.Errorf("container has runAsNonRoot and the image's user cannot be verified (pod: %q, container: %s)", pod.Namespace+"/"+pod.Name, c.Name)
	}
	uid, name, err := users.ImageUser(ctx, imageRef)
	if err != nil {
		return fmt.Errorf("verify non-root user: %w", err)
	}
	if uid == nil && name == "" {
		uid = new(int64) // no user in the image: root, as upstream
	}
	switch {
	case uid != nil && *uid == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", pod.Namespace+"/"+pod.Name, c.Name)
	case uid == nil && name != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", name, pod.Namespace+"/"+pod.Name, c.Name)
	}
	return nil
}

// seccompProfile is the container's seccomp profile for CRI, as upstream:
// the container's securityContext.seccompProfile, else the pod's, else
// RuntimeDefault with seccompDefault, Unconfined without; privileged
// containers are unconfined (the runtime would not apply a profile to
// them either).
func (m *Manager) seccompProfile(pod *v1.Pod, c *v1.Container) (*runtimeapi.SecurityProfile, error) {
	if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	var p *v1.SeccompProfile
	if pod.Spec.SecurityContext != nil {
		p = pod.Spec.SecurityContext.SeccompProfile
	}
	if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
		p = c.SecurityContext.SeccompProfile
	}
	return m.toSeccomp(p)
}

func (m *Manager) toSeccomp(p *v1.SeccompProfile) (*runtimeapi.SecurityProfile, error) {
	if p == nil {
		if m.cfg.SeccompDefault {
			return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	switch p.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.SeccompProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	case v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" || filepath.IsAbs(*p.LocalhostProfile) ||
			strings.Contains("/"+*p.LocalhostProfile+"/", "/../") {
			return nil, fmt.Errorf("seccompProfile Localhost needs a relative localhostProfile without '..'")
		}
		path := filepath.Join(rootdir.Dir(m.cfg.RootDir).Seccomp(), *p.LocalhostProfile)
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("seccomp profile %q: %w", *p.LocalhostProfile, err)
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: path}, nil
	}
	return nil, fmt.Errorf("unsupported seccompProfile type %q", p.Type)
}

// appArmorEnabled reports whether the host enforces AppArmor.
func appArmorEnabled() bool {
	data, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	return err == nil && strings.HasPrefix(string(data), "Y")
}

// checkAppArmor refuses an AppArmor profile the host cannot enforce, as
// upstream does, instead of running the container without it.
func checkAppArmor(pod *v1.Pod, c *v1.Container) error {
	var p *v1.AppArmorProfile
	if pod.Spec.SecurityContext != nil {
		p = pod.Spec.SecurityContext.AppArmorProfile
	}
	if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
		p = c.SecurityContext.AppArmorProfile
	}
	if p == nil || p.Type == v1.AppArmorProfileTypeUnconfined {
		return nil
	}
	if !appArmorEnabled() {
		return fmt.Errorf("cannot enforce AppArmor: AppArmor is not enabled on the host")
	}
	return fmt.Errorf("appArmorProfile %s is not supported by nodelet yet", p.Type)
}

// RuntimeHandlers resolves a RuntimeClass name to its CRI runtime handler.
type RuntimeHandlers func(ctx context.Context, runtimeClassName string) (string, error)

// runtimeHandler is the CRI handler of the pod's RuntimeClass ("" for the
// runtime's default).
func (m *Manager) runtimeHandler(ctx context.Context, pod *v1.Pod) (string, error) {
	name := pod.Spec.RuntimeClassName
	if name == nil || *name == "" {
		return "", nil
	}
	if m.cfg.RuntimeHandlers == nil {
		return "", fmt.Errorf("RuntimeClass %q: runtime classes need an API server", *name)
	}
	return m.cfg.RuntimeHandlers(ctx, *name)
}
