package framework

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
)

// Stack is the running local stack, as described by .stack/env.
type Stack struct {
	RepoRoot        string
	Env             map[string]string
	RuntimeEndpoint string
	Registry        string
	NodeIP          string
	Runtime         internalapi.RuntimeService
	Images          internalapi.ImageManagerService
	// CDISpecDir is where the runtime reads CDI specs (containerd v2 from
	// StartContainerd2; "" when the runtime has no CDI, as Debian's 1.6).
	CDISpecDir string
}

var (
	stackOnce sync.Once
	stack     *Stack
	stackErr  error
)

// InCI reports whether the tests run in CI, where nothing may be skipped.
func InCI() bool { return os.Getenv("CI") == "true" }

// RequireStack returns the stack, starting it with hack/stack-up.sh when it is
// not running. It fails the test in CI and skips it elsewhere when the stack
// cannot be had.
func RequireStack(t testing.TB) *Stack {
	t.Helper()
	stackOnce.Do(func() { stack, stackErr = findOrStartStack() })
	if stackErr != nil {
		if InCI() {
			t.Fatalf("the local stack is required: %v", stackErr)
		}
		t.Skipf("the local stack is not available (run `make stack-up` as root): %v", stackErr)
	}
	return stack
}

// RepoRoot is the directory holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found above the working directory")
		}
		dir = parent
	}
}

func findOrStartStack() (*Stack, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	envFile := filepath.Join(root, ".stack", "env")
	s, err := loadStack(root, envFile)
	if err == nil {
		return s, nil
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("stack not running (%v) and not root to start it", err)
	}
	cmd := exec.Command("bash", filepath.Join(root, "hack", "stack-up.sh"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("hack/stack-up.sh: %w", err)
	}
	return loadStack(root, envFile)
}

func loadStack(root, envFile string) (*Stack, error) {
	env, err := ReadEnvFile(envFile)
	if err != nil {
		return nil, err
	}
	s := &Stack{
		RepoRoot:        root,
		Env:             env,
		RuntimeEndpoint: env["CONTAINER_RUNTIME_ENDPOINT"],
		Registry:        env["REGISTRY"],
		NodeIP:          env["NODE_IP"],
	}
	if s.RuntimeEndpoint == "" || s.Registry == "" {
		return nil, fmt.Errorf("%s lacks CONTAINER_RUNTIME_ENDPOINT or REGISTRY", envFile)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.Runtime, err = remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(s.RuntimeEndpoint).
		WithConnectionTimeout(5 * time.Second).WithTracerProvider(nil).Build(ctx)
	if err != nil {
		return nil, fmt.Errorf("containerd at %s: %w", s.RuntimeEndpoint, err)
	}
	s.Images, err = remote.NewRemoteImageServiceBuilder().WithEndpoint(s.RuntimeEndpoint).
		WithConnectionTimeout(5 * time.Second).WithTracerProvider(nil).Build(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// ReadEnvFile parses the `export K="V"` lines of .stack/env.
func ReadEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export "))
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		env[k] = strings.Trim(v, `"'`)
	}
	return env, sc.Err()
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// NodeletBinary builds nodelet once per test binary and returns its path.
func NodeletBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "nodelet-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "nodelet")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/nodelet")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building nodelet: %v", buildErr)
	}
	return binPath
}
