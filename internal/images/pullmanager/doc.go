// Package pullmanager owns the records behind KubeletEnsureSecretPulledImages
// (KEP-2535), a port of upstream's pkg/kubelet/images/pullmanager: which
// images the kubelet pulled, and with which credentials, so that a pod may
// only use an image already on the node if the credential verification
// policy (imagePullCredentialsVerificationPolicy: NeverVerify,
// NeverVerifyPreloadedImages, NeverVerifyAllowlistedImages with
// preloadedImagesVerificationAllowlist, AlwaysVerify) lets it, or if the pod
// presents a pull secret (same coordinates, or same credential hash) or a
// service account the image was pulled with, or the image was pulled with
// credentials every pod of the node has.
//
// Before a pull the Manager writes an ImagePullIntent, after a successful one
// an ImagePulledRecord keyed by the image's CRI reference (merging the new
// credentials into the record), both kubelet.config.k8s.io/v1beta1 JSON
// files named "sha256-<hex of the image or reference>" under
// <root dir>/image_manager/pulling and .../pulled, byte for byte what the
// upstream kubelet writes, so either can read the other's records; v1alpha1
// records are read and rewritten as v1beta1 at start. An LRU cache sits over
// the files. At start, intents left by a previous run whose image the runtime
// now has become pulled records without credentials (a pod must then verify
// its credentials); the image garbage collector calls PruneUnknownRecords to
// drop the records of images gone from the runtime. It exposes upstream's
// kubelet_imagemanager_* metrics.
package pullmanager
