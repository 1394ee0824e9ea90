// Package images owns getting a container's image onto the node: it applies
// the container's imagePullPolicy (Always, IfNotPresent, Never), pulls
// through the CRI image service (one pull at a time when
// serializeImagePulls), backs off failed pulls per pod and image (10 s
// doubling to 300 s, as upstream) and records the upstream events (Pulling,
// Pulled, Failed, BackOff, ErrImageNeverPull).
package images
