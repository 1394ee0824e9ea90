package admission

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
	ndftypes "k8s.io/component-helpers/nodedeclaredfeatures/types"
)

// declarable are the node-declared features (NodeDeclaredFeatures, GA
// and locked on in 1.37) nodelet implements: only these are declared,
// whatever the gates say, so that the scheduler never sends a pod that
// needs another (in-place resize of pod-level resources, DRA node
// operations, user namespaces with the host network, bind mount options).
var declarable = map[string]bool{
	// kuberuntime's RestartAll.
	"RestartAllContainersOnContainerExits": true,
	// kuberuntime resizes running init containers in place, sidecars or
	// not (resizeAction), as it does app containers.
	"InPlacePodVerticalScalingInitContainers": true,
	// exec, attach and port-forward proxy the upgraded connection to the
	// runtime's streaming server, WebSocket clients included (server).
	"ExtendWebSocketsToKubelet": true,
}

// DeclaredFeatures is the node's declared features (status.declaredFeatures)
// and upstream's admission check against them: a pod that needs a feature
// the node does not declare is refused (PodFeatureUnsupported).
type DeclaredFeatures struct {
	framework *ndf.Framework
	names     []string
	set       ndf.FeatureSet
	version   *version.Version
}

// NewDeclaredFeatures discovers the node's features as upstream's kubelet
// does (the framework's registry, each feature's gates), among those
// nodelet implements. gate reports whether a feature gate is on;
// kubeletVersion is the version the node reports.
func NewDeclaredFeatures(gate func(name string) bool, kubeletVersion string) (*DeclaredFeatures, error) {
	v, err := version.Parse(kubeletVersion)
	if err != nil {
		return nil, fmt.Errorf("declared features: version %q: %w", kubeletVersion, err)
	}
	gates := ndftypes.FeatureGateMap{}
	for name := range declarable {
		gates[name] = gate(name)
	}
	d := &DeclaredFeatures{framework: ndf.DefaultFramework, version: v}
	d.names = d.framework.DiscoverNodeFeatures(&ndftypes.NodeConfiguration{FeatureGates: gates, Version: v})
	if d.set, err = d.framework.MapSorted(d.names); err != nil {
		return nil, fmt.Errorf("declared features: %w", err)
	}
	return d, nil
}

// Names are the declared features, sorted (status.declaredFeatures).
func (d *DeclaredFeatures) Names() []string { return append([]string(nil), d.names...) }

// Admit refuses a pod that needs a feature the node does not declare, with
// upstream's reason and messages.
func (d *DeclaredFeatures) Admit(_ context.Context, a Attributes) Result {
	pod := a.Pod
	reqs, err := d.framework.InferForPodScheduling(&ndf.PodInfo{Spec: &pod.Spec, Status: &pod.Status}, d.version)
	if err != nil {
		return reject(ReasonPodFeatureUnsupported, "Failed to infer pod's feature requirements: %v", err)
	}
	if reqs.IsEmpty() {
		return Result{Admit: true}
	}
	match, err := d.framework.MatchNodeFeatureSet(reqs, d.set)
	if err != nil {
		return reject(ReasonPodFeatureUnsupported, "Failed to match pod's feature requirements against the node: %v", err)
	}
	if !match.IsMatch {
		return reject(ReasonPodFeatureUnsupported, "Pod requires node features that are not available: %s", strings.Join(match.UnsatisfiedRequirements, ", "))
	}
	return Result{Admit: true}
}

// ReasonPodFeatureUnsupported is upstream's reason for a pod refused for a
// feature the node lacks.
const ReasonPodFeatureUnsupported = "PodFeatureUnsupported"
