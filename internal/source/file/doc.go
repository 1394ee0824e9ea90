// Package file owns the static pod source: the manifests in the
// staticPodPath directory. It reads every manifest (YAML or JSON, a Pod or a
// PodList per document), defaults and validates them as the upstream kubelet
// does for static pods, and sends the complete set of pods on its channel
// whenever that set changes. It watches the directory with fsnotify and also
// re-reads it every fileCheckFrequency, so a missed event costs at most one
// period.
//
// A manifest that cannot be read, decoded or validated is logged with its
// file name and reason and never stops the source: the other files' pods are
// sent as usual. If the file held a valid pod before, that last good pod is
// kept (an editor's half-written save must not kill a running pod); a file
// that never held a valid pod contributes nothing.
package file
