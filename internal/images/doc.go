// Package images owns getting a container's image onto the node: it applies
// the container's imagePullPolicy (Always, IfNotPresent, Never), pulls
// through the CRI image service with the credentials of the pod's
// imagePullSecrets (kubernetes.io/dockerconfigjson and kubernetes.io/dockercfg
// Secrets, matched to the image's registry host, port and path as upstream's
// credential keyring does, each tried in turn), one pull at a time when
// serializeImagePulls, else up to maxParallelImagePulls at once, one pull
// shared by the pods that want the same image with the same credentials. It
// backs off failed pulls per pod and image (10 s doubling to 300 s, as
// upstream) and records the upstream events (Pulling, Pulled, Failed,
// BackOff, ErrImageNeverPull, FailedToRetrieveImagePullSecret).
package images
