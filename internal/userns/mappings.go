package userns

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

const (
	// DefaultIDsPerPod is the length of a pod's UID and GID mappings when
	// userNamespaces.idsPerPod is not set (upstream's
	// DefaultKubeletUserNamespacesIDsPerPod).
	DefaultIDsPerPod = 65536

	// userNsUnitLength is the unit length of a user namespace: idsPerPod
	// and the kubelet's range are multiples of it.
	userNsUnitLength = 65536

	// kubeletUser is the user whose subordinate IDs are the kubelet's range.
	kubeletUser = "kubelet"

	// getSubIDs is the shadow-utils tool that reports subordinate IDs.
	getSubIDs = "getsubids"
)

// ValidateIDsPerPod checks userNamespaces.idsPerPod as the kubelet's
// configuration validation does on Linux; nil (the default) is valid.
func ValidateIDsPerPod(idsPerPod *int64) error {
	if idsPerPod == nil {
		return nil
	}
	if *idsPerPod < userNsUnitLength {
		return fmt.Errorf("invalid configuration: userNamespaces.idsPerPod must not be less than %d", userNsUnitLength)
	}
	if *idsPerPod%userNsUnitLength != 0 {
		return fmt.Errorf("invalid configuration: userNamespaces.idsPerPod must be a multiple of %d", userNsUnitLength)
	}
	if *idsPerPod > math.MaxUint32 {
		return fmt.Errorf("invalid configuration: userNamespaces.idsPerPod must not be more than %d", int64(math.MaxUint32))
	}
	return nil
}

// DefaultMappings is the kubelet's range when no subordinate IDs are set
// up for the user "kubelet": every ID but those below idsPerPod, so
// [idsPerPod, 2^32).
func DefaultMappings(idsPerPod uint32) (firstID, length uint32) {
	return idsPerPod, uint32((1 << 32) - uint64(idsPerPod))
}

// GetKubeletMappings returns the range of IDs the kubelet may use for
// pods' user namespaces, as upstream's getKubeletMappings: when the user
// "kubelet" exists and getsubids is installed, the single range getsubids
// reports for it (which must be the same for UIDs and GIDs); the default
// range (DefaultMappings) when the user or the tool is missing.
func GetKubeletMappings(ctx context.Context, idsPerPod uint32) (firstID, length uint32, err error) {
	return kubeletMappings(ctx, idsPerPod, hostSubIDs{
		lookupUser: func(name string) error {
			_, err := user.Lookup(name)
			return err
		},
		lookPath: exec.LookPath,
		output: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return exec.CommandContext(ctx, name, args...).Output()
		},
	})
}

// hostSubIDs is what kubeletMappings asks the host.
type hostSubIDs struct {
	lookupUser func(name string) error
	lookPath   func(file string) (string, error)
	output     func(ctx context.Context, name string, args ...string) ([]byte, error)
}

func kubeletMappings(ctx context.Context, idsPerPod uint32, host hostSubIDs) (uint32, uint32, error) {
	logger := klog.FromContext(ctx)
	defaultFirstID, defaultLen := DefaultMappings(idsPerPod)

	// The user is looked up first because getsubids may ask a remote
	// service: when the user exists and getsubids is there, some range is
	// expected, and none means the service is down, so starting fails.
	if err := host.lookupUser(kubeletUser); err != nil {
		var unknownUserErr user.UnknownUserError
		if errors.As(err, &unknownUserErr) {
			logger.V(5).Info("user namespaces: user not found, using default mappings", "user", kubeletUser)
			return defaultFirstID, defaultLen, nil
		}
		return 0, 0, err
	}

	cmd, err := host.lookPath(getSubIDs)
	if err != nil {
		// As upstream: os.IsNotExist does not see exec.ErrNotFound, so a
		// missing getsubids (with the user present) fails here.
		if os.IsNotExist(err) {
			logger.V(2).Info("user namespaces: executable not found, using default mappings", "executable", getSubIDs, "err", err)
			return defaultFirstID, defaultLen, nil
		}
		return 0, 0, err
	}
	outUids, err := host.output(ctx, cmd, kubeletUser)
	if err != nil {
		return 0, 0, fmt.Errorf("error retrieving additional uids for user %q: %w", kubeletUser, err)
	}
	outGids, err := host.output(ctx, cmd, "-g", kubeletUser)
	if err != nil {
		return 0, 0, fmt.Errorf("error retrieving additional gids for user %q", kubeletUser)
	}
	if string(outUids) != string(outGids) {
		return 0, 0, fmt.Errorf("mismatched subuids and subgids for user %q", kubeletUser)
	}
	logger.V(5).Info("user namespaces: user found, using mappings from getsubids", "user", kubeletUser)
	return parseGetSubIdsOutput(string(outUids))
}

// parseGetSubIdsOutput parses what getsubids prints: one line per range,
// and exactly one is expected, e.g.
//
//	$ getsubids kubelet
//	0: kubelet 65536 2147483648
func parseGetSubIdsOutput(input string) (uint32, uint32, error) {
	lines := strings.Split(strings.Trim(input, "\n"), "\n")
	if len(lines) != 1 {
		return 0, 0, fmt.Errorf("error parsing line %q: it must contain only one line", input)
	}

	parts := strings.Fields(lines[0])
	if len(parts) != 4 {
		return 0, 0, fmt.Errorf("invalid line %q", input)
	}

	num1, err := strconv.ParseUint(parts[2], 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("error parsing line %q: %w", input, err)
	}

	num2, err := strconv.ParseUint(parts[3], 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("error parsing line %q: %w", input, err)
	}

	return uint32(num1), uint32(num2), nil
}

// RuntimeHandlerSupportsUserNamespaces tells, from the handlers the CRI
// runtime's Status reports, whether the named one supports user
// namespaces, as upstream's Kubelet.HandlerSupportsUserNamespaces: false
// when the runtime reports no handlers (too old to say), an error when it
// does not know the name ("" is the default handler).
func RuntimeHandlerSupportsUserNamespaces(handlers []*runtimeapi.RuntimeHandler, name string) (bool, error) {
	if len(handlers) == 0 {
		return false, nil
	}
	for _, h := range handlers {
		if h.GetName() == name {
			return h.GetFeatures().GetUserNamespaces(), nil
		}
	}
	return false, fmt.Errorf("the handler %q is not known", name)
}
