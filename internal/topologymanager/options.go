package topologymanager

import (
	"fmt"
	"strconv"
)

// The policy options, upstream's names (both GA).
const (
	PreferClosestNUMANodes = "prefer-closest-numa-nodes"
	MaxAllowableNUMANodes  = "max-allowable-numa-nodes"
)

// defaultMaxAllowableNUMANodes is upstream's limit of NUMA nodes.
const defaultMaxAllowableNUMANodes = 8

// PolicyOptions are topologyManagerPolicyOptions.
type PolicyOptions struct {
	PreferClosestNUMA     bool
	MaxAllowableNUMANodes int
}

// NewPolicyOptions parses topologyManagerPolicyOptions with upstream's
// messages.
func NewPolicyOptions(options map[string]string) (PolicyOptions, error) {
	opts := PolicyOptions{MaxAllowableNUMANodes: defaultMaxAllowableNUMANodes}
	for name, value := range options {
		switch name {
		case PreferClosestNUMANodes:
			v, err := strconv.ParseBool(value)
			if err != nil {
				return opts, fmt.Errorf("bad value for option %q: %w", name, err)
			}
			opts.PreferClosestNUMA = v
		case MaxAllowableNUMANodes:
			v, err := strconv.Atoi(value)
			if err != nil {
				return opts, fmt.Errorf("unable to convert policy option to integer %q: %w", name, err)
			}
			if v < defaultMaxAllowableNUMANodes {
				return opts, fmt.Errorf("the minimum value of %q should not be less than %v", name, defaultMaxAllowableNUMANodes)
			}
			opts.MaxAllowableNUMANodes = v
		default:
			return opts, fmt.Errorf("unknown Topology Manager Policy option: %q", name)
		}
	}
	return opts, nil
}
