package eviction

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal is what a threshold watches, by upstream's names.
type Signal string

// The signals, as upstream.
const (
	MemoryAvailable            Signal = "memory.available"
	AllocatableMemoryAvailable Signal = "allocatableMemory.available"
	NodeFsAvailable            Signal = "nodefs.available"
	NodeFsInodesFree           Signal = "nodefs.inodesFree"
	ImageFsAvailable           Signal = "imagefs.available"
	ImageFsInodesFree          Signal = "imagefs.inodesFree"
	ContainerFsAvailable       Signal = "containerfs.available"
	ContainerFsInodesFree      Signal = "containerfs.inodesFree"
	PIDAvailable               Signal = "pid.available"
)

// Resources a threshold makes the node reclaim, beside v1's.
const (
	ResourceInodes v1.ResourceName = "inodes"
	ResourcePIDs   v1.ResourceName = "pids"
)

// signalInfo is what a signal means: the node condition it raises and the
// resource it reclaims.
var signalInfo = map[Signal]struct {
	condition v1.NodeConditionType
	resource  v1.ResourceName
}{
	MemoryAvailable:            {v1.NodeMemoryPressure, v1.ResourceMemory},
	AllocatableMemoryAvailable: {v1.NodeMemoryPressure, v1.ResourceMemory},
	NodeFsAvailable:            {v1.NodeDiskPressure, v1.ResourceEphemeralStorage},
	NodeFsInodesFree:           {v1.NodeDiskPressure, ResourceInodes},
	ImageFsAvailable:           {v1.NodeDiskPressure, v1.ResourceEphemeralStorage},
	ImageFsInodesFree:          {v1.NodeDiskPressure, ResourceInodes},
	ContainerFsAvailable:       {v1.NodeDiskPressure, v1.ResourceEphemeralStorage},
	ContainerFsInodesFree:      {v1.NodeDiskPressure, ResourceInodes},
	PIDAvailable:               {v1.NodePIDPressure, ResourcePIDs},
}

// Condition is the node condition a signal's threshold raises.
func (s Signal) Condition() v1.NodeConditionType { return signalInfo[s].condition }

// Resource is what the node reclaims when the signal's threshold is met.
func (s Signal) Resource() v1.ResourceName { return signalInfo[s].resource }

// DefaultHard are upstream's hard thresholds on Linux: what evictionHard is
// when the configuration does not set it.
var DefaultHard = map[string]string{
	string(MemoryAvailable):   "100Mi",
	string(NodeFsAvailable):   "10%",
	string(NodeFsInodesFree):  "5%",
	string(ImageFsAvailable):  "15%",
	string(ImageFsInodesFree): "5%",
}

// Value is a threshold's amount: a quantity, or a fraction (0..1] of the
// signal's capacity.
type Value struct {
	Quantity   *resource.Quantity
	Percentage float32
}

// Of is the value for a capacity: the quantity, or the percentage of it.
func (v Value) Of(capacity *resource.Quantity) *resource.Quantity {
	if v.Quantity != nil {
		q := v.Quantity.DeepCopy()
		return &q
	}
	return resource.NewQuantity(int64(float64(v.Percentage)*float64(capacity.Value())), resource.BinarySI)
}

func (v Value) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	return strconv.FormatFloat(math.Round(float64(v.Percentage)*1e6)/1e4, 'f', -1, 64) + "%" // as given, float32 noise rounded off
}

// Threshold is met when its signal's available amount is below Value. A
// soft threshold (GracePeriod > 0) must stay met for its grace period
// before it counts; MinReclaim asks for that much more than the threshold
// before a met threshold counts as resolved.
type Threshold struct {
	Signal      Signal
	Value       Value
	GracePeriod time.Duration
	MinReclaim  *Value
}

// Hard reports whether the threshold acts at once (no grace period).
func (t Threshold) Hard() bool { return t.GracePeriod == 0 }

func (t Threshold) String() string { return string(t.Signal) + "<" + t.Value.String() }

// Settings are the eviction settings of a KubeletConfiguration, after
// defaulting (evictionHard already holds upstream's defaults when unset).
type Settings struct {
	Hard, Soft, SoftGracePeriod, MinimumReclaim map[string]string
	// PodsAllocatable: enforceNodeAllocatable has "pods"; each hard
	// memory.available threshold then has an allocatableMemory.available
	// twin, as upstream.
	PodsAllocatable bool
}

// ParseThresholds turns the configuration's maps into thresholds, as
// upstream: a signal it does not know, a soft threshold without a grace
// period, a percentage outside 0..100 or a quantity that is not positive is
// an error; 0% and 100% mean no threshold.
func ParseThresholds(s Settings) ([]Threshold, error) {
	hard, err := parseStatements("evictionHard", s.Hard)
	if err != nil {
		return nil, err
	}
	soft, err := parseStatements("evictionSoft", s.Soft)
	if err != nil {
		return nil, err
	}
	for i := range soft {
		sig := soft[i].Signal
		raw, ok := s.SoftGracePeriod[string(sig)]
		if !ok {
			return nil, fmt.Errorf("evictionSoftGracePeriod: a grace period is required for the soft threshold of %s", sig)
		}
		d, err := time.ParseDuration(raw)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("evictionSoftGracePeriod[%s]: %q is not a positive duration", sig, raw)
		}
		// As upstream, a zero grace period makes the threshold act as a
		// hard one.
		soft[i].GracePeriod = d
	}
	for sig := range s.SoftGracePeriod {
		if _, ok := signalInfo[Signal(sig)]; !ok {
			return nil, fmt.Errorf("evictionSoftGracePeriod: unsupported eviction signal %q", sig)
		}
	}
	all := append(hard, soft...)
	for sig, raw := range s.MinimumReclaim {
		if _, ok := signalInfo[Signal(sig)]; !ok {
			return nil, fmt.Errorf("evictionMinimumReclaim: unsupported eviction signal %q", sig)
		}
		v, err := parseValue(raw, true)
		if err != nil {
			return nil, fmt.Errorf("evictionMinimumReclaim[%s]: %w", sig, err)
		}
		for i := range all {
			if string(all[i].Signal) == sig {
				all[i].MinReclaim = &v
			}
		}
	}
	if s.PodsAllocatable {
		for _, t := range all {
			if t.Signal == MemoryAvailable && t.Hard() {
				all = append(all, Threshold{Signal: AllocatableMemoryAvailable, Value: t.Value, MinReclaim: t.MinReclaim})
			}
		}
	}
	return all, nil
}

func parseStatements(field string, m map[string]string) ([]Threshold, error) {
	var out []Threshold
	for sig, raw := range m {
		if _, ok := signalInfo[Signal(sig)]; !ok {
			return nil, fmt.Errorf("%s: unsupported eviction signal %q", field, sig)
		}
		if raw == "0%" || raw == "100%" {
			continue
		}
		v, err := parseValue(raw, false)
		if err != nil {
			return nil, fmt.Errorf("%s[%s]: %w", field, sig, err)
		}
		out = append(out, Threshold{Signal: Signal(sig), Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Signal < out[j].Signal })
	return out, nil
}

// parseValue parses "10%" or a quantity ("100Mi"); a minimum reclaim may
// be a zero quantity.
func parseValue(raw string, zeroOK bool) (Value, error) {
	if p, ok := strings.CutSuffix(raw, "%"); ok {
		f, err := strconv.ParseFloat(p, 32)
		if err != nil {
			return Value{}, fmt.Errorf("%q is not a percentage", raw)
		}
		if f <= 0 || f > 100 {
			return Value{}, fmt.Errorf("percentage %q must be above 0%% and at most 100%%", raw)
		}
		return Value{Percentage: float32(f / 100)}, nil
	}
	q, err := resource.ParseQuantity(raw)
	if err != nil {
		return Value{}, fmt.Errorf("%q is not a quantity: %w", raw, err)
	}
	if q.Sign() < 0 || (q.IsZero() && !zeroOK) {
		return Value{}, fmt.Errorf("quantity %q must be positive", raw)
	}
	return Value{Quantity: &q}, nil
}

// MergeDefaults is upstream's rule for evictionHard: unset, it is
// DefaultHard; set, it is kept as given (the defaults it does not name are
// dropped) unless merge (mergeDefaultEvictionSettings) asks to add them.
func MergeDefaults(hard map[string]string, merge bool) map[string]string {
	if hard == nil {
		out := make(map[string]string, len(DefaultHard))
		for k, v := range DefaultHard {
			out[k] = v
		}
		return out
	}
	if merge {
		for k, v := range DefaultHard {
			if _, set := hard[k]; !set {
				hard[k] = v
			}
		}
	}
	return hard
}
