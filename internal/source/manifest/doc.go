// Package manifest owns the decoding of static pod manifests, shared by the
// static pod directory's source and the manifest URL's: YAML or JSON, a Pod
// or a PodList per document, several documents; unknown fields are warnings
// (as the API server's), anything else but a v1 Pod or PodList an error; the
// pods get upstream's static pod defaults (podspec.ApplyStaticDefaults) and
// must pass podspec.Validate.
package manifest
