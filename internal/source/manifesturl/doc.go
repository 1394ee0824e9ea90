// Package manifesturl owns the static pod source of the manifest URL
// (staticPodURL, --manifest-url), upstream's "http" source. It GETs the URL
// at start and then every httpCheckFrequency, with the staticPodURLHeader
// headers, and sends the complete set of pods on its channel whenever the
// answer changes: a Pod, a PodList or several YAML documents, decoded and
// defaulted as upstream does for pods of a URL (annotated
// kubernetes.io/config.source: http, UIDs hashing the content and the URL).
//
// As upstream: an answer that is not 200, that cannot be read or decoded, or
// a URL that cannot be reached keeps the pods of the last good answer (the
// first three failures in a row are logged, later ones at V(4)); an empty
// answer is an empty set (the URL's pods are removed); the source counts as
// seen from its first good or empty answer, so nothing on the node is
// removed as an orphan while the URL has never answered.
package manifesturl
