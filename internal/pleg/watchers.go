package pleg

// RuntimeWatchers are the event streams a PLEG follows to relist as soon
// as a container changes, for the runtime at endpoint: the CRI's own
// (containerd >= 1.7, CRI-O), else containerd's event service (containerd
// 1.6). Upstream's EventedPLEG feature gate set to false in featureGates
// turns them off (relisting every period only).
func RuntimeWatchers(endpoint string, featureGates map[string]bool) []Watcher {
	if on, set := featureGates["EventedPLEG"]; set && !on {
		return nil
	}
	return []Watcher{&CRIEvents{Endpoint: endpoint}, &ContainerdEvents{Endpoint: endpoint}}
}
