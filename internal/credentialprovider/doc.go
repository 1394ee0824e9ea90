// Package credentialprovider owns the kubelet's image credential provider
// plugins (--image-credential-provider-config and
// --image-credential-provider-bin-dir), a port of upstream's
// pkg/credentialprovider/plugin: it reads and validates the
// CredentialProviderConfig (a file, or a directory of *.json, *.yaml and
// *.yml files merged in lexicographic order), and for an image being pulled
// it runs each provider whose matchImages match, in config order: the
// plugin binary is executed with a CredentialProviderRequest on stdin in the
// provider's apiVersion and must answer a CredentialProviderResponse of the
// same apiVersion on stdout within a minute. Answers are cached per image,
// registry or globally as the plugin asks, for its cacheDuration (else the
// provider's defaultCacheDuration), and concurrent identical requests share
// one execution. Providers with tokenAttributes
// (KubeletServiceAccountTokenForCredentialProviders, on in v1.37) get a
// service account token bound to the pod and the service account's
// annotations they ask for, and their answers are cached per service
// account (or per token). What credentials to give the runtime from the
// answers (the keyring's matching) is the caller's: this package returns
// each provider's docker-config style map.
package credentialprovider
