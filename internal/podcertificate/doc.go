// Package podcertificate owns the credentials of podCertificate projected
// volume sources (KEP-4317, certificates.k8s.io/v1 PodCertificateRequest),
// as upstream kubelet's pkg/kubelet/podcertificate: for each such source of
// each pod the node runs it generates a private key of the source's key
// type, creates a PodCertificateRequest for the pod (owned by it, naming
// the node, the service account and the signer, with a stub PKCS#10 request
// as proof of possession), waits through an informer on the node's
// requests (spec.nodeName) until the signer issues, denies or fails it, and
// starts over with a new key at the issued certificate's beginRefreshAt
// (plus up to five minutes of jitter). The projected volume reads the
// result with GetPodCertificateCredentialBundle: the PEM private key
// (PKCS#8) and the PEM certificate chain.
//
// State is in memory only, as upstream: after a restart every source gets a
// new key and request. A denied or failed request is final for the source;
// the pod must be recreated.
//
// Which state a request is in, when to refresh, when a credential is
// overdue or expired are pure functions (state.go).
package podcertificate
