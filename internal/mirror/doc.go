// Package mirror owns mirror pods: the read-only copies of static pods that
// nodelet keeps in the API server so that the cluster sees them. A mirror
// pod carries the kubernetes.io/config.mirror annotation (the static pod's
// hash) and is owned by the Node. A deleted mirror pod is created again; a
// mirror pod whose hash no longer matches its static pod (the manifest
// changed) is replaced. Deleting a mirror pod never stops the static pod.
package mirror
