package podspec

import v1 "k8s.io/api/core/v1"

// IsTerminal reports whether phase is final: Succeeded or Failed. A pod in
// a terminal phase never runs again.
func IsTerminal(phase v1.PodPhase) bool { return phase == v1.PodSucceeded || phase == v1.PodFailed }
