package eviction

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/machine"
)

// NotifiersConfig is where the memory signals' notifiers read.
type NotifiersConfig struct {
	// Cgroups is the machine's cgroup mount and version.
	Cgroups machine.Cgroups
	// PodsCgroup is the pods' cgroup (kubepods), under the mount.
	PodsCgroup string
	// NodeMemoryUsage and PodsMemoryUsage read the node's and the pods'
	// memory usage, page cache included (cgroup v2's poll).
	NodeMemoryUsage, PodsMemoryUsage func() (int64, error)
	// Clock times the polls (the real clock when nil).
	Clock clock.WithTicker
}

// MemoryNotifiers are the notifiers that wake the manager when a memory
// signal with one of thresholds crosses it: memory.available on the root
// memory cgroup, allocatableMemory.available on the pods' cgroup; on
// cgroup v1 the kernel's thresholds (NewMemcgNotifier), on v2 a poll of the
// usage and of the pods' cgroup's memory.events (NewPollNotifier). A signal
// whose notifier cannot be made is in the error, the others are returned:
// that signal is observed every monitoring period only.
func MemoryNotifiers(thresholds []Threshold, cfg NotifiersConfig) (map[Signal]MemoryNotifier, error) {
	cg := cfg.Cgroups
	if cg.Mount == "" {
		return nil, errors.New("no cgroup mount")
	}
	out := map[Signal]MemoryNotifier{}
	var errs []error
	for _, signal := range []Signal{MemoryAvailable, AllocatableMemoryAvailable} {
		if !slices.ContainsFunc(thresholds, func(t Threshold) bool { return t.Signal == signal }) {
			continue
		}
		var nf MemoryNotifier
		var err error
		switch {
		case !cg.V2 && signal == MemoryAvailable:
			nf, err = NewMemcgNotifier(filepath.Join(cg.Mount, "memory"))
		case !cg.V2:
			nf, err = NewMemcgNotifier(cg.Dir("memory", cfg.PodsCgroup))
		case signal == MemoryAvailable:
			nf, err = NewPollNotifier(PollConfig{Usage: cfg.NodeMemoryUsage, Clock: cfg.Clock})
		default:
			nf, err = NewPollNotifier(PollConfig{Usage: cfg.PodsMemoryUsage, Events: filepath.Join(cg.Dir("memory", cfg.PodsCgroup), "memory.events"), Clock: cfg.Clock})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", signal, err))
			continue
		}
		out[signal] = nf
	}
	return out, errors.Join(errs...)
}
