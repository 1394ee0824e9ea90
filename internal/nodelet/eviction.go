package nodelet

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/eviction"
)

// newEviction is the eviction manager of the configuration's thresholds,
// observing the stats summary.
func (n *Nodelet) newEviction() (*eviction.Manager, error) {
	cfg := &n.opts.Config
	thresholds, err := eviction.ParseThresholds(eviction.Settings{
		Hard: cfg.EvictionHard, Soft: cfg.EvictionSoft, SoftGracePeriod: cfg.EvictionSoftGracePeriod, MinimumReclaim: cfg.EvictionMinimumReclaim,
	})
	if err != nil {
		return nil, fmt.Errorf("eviction thresholds: %w", err)
	}
	return eviction.New(eviction.Config{
		Thresholds:               thresholds,
		PressureTransitionPeriod: cfg.EvictionPressureTransitionPeriod.Duration,
		Summary:                  n.stats,
		Recorder:                 n.recorder,
		Node:                     &v1.ObjectReference{Kind: "Node", Name: n.opts.NodeName, UID: types.UID(n.opts.NodeName)},
		Clock:                    n.clock,
	})
}
