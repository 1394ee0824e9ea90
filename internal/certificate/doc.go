// Package certificate owns nodelet's TLS identities, as the upstream
// kubelet's pkg/kubelet/certificate does with client-go's
// util/certificate:
//
//   - TLS bootstrap (--bootstrap-kubeconfig): when --kubeconfig is missing
//     or its client certificate is unreadable or expired, a key is made
//     (kept in <cert-dir>/kubelet-client.key.tmp until issued), a CSR with
//     signer kubernetes.io/kube-apiserver-client-kubelet, CN
//     system:node:<name> and O system:nodes is sent with the bootstrap
//     credentials, the issued certificate is stored as
//     kubelet-client-<timestamp>.pem behind the kubelet-client-current.pem
//     symlink, and the kubeconfig is written pointing at it;
//   - client certificate rotation (rotateCertificates): a certificate
//     manager renews the client certificate at a jittered 70-90% of its
//     lifetime (falling back to the bootstrap credentials when the current
//     one is gone), and the API clients' transport takes the new one,
//     closing its connections so every watch resumes on it;
//   - the serving certificate (serverTLSBootstrap): requested with signer
//     kubernetes.io/kubelet-serving and the node's addresses as SANs,
//     stored as kubelet-server-current.pem, renewed the same way, and
//     handed to the kubelet API server through GetCertificate.
package certificate
