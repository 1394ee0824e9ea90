// Package apiclient owns nodelet's connection to the API server: the
// clients' base configuration from the kubeconfig (TLS bootstrap with
// --bootstrap-kubeconfig, the client certificate's rotation with
// rotateCertificates, as upstream's buildKubeletClientConfig), the main
// client (kubeAPIQPS, kubeAPIBurst, contentType; its transport wrapped to
// follow whether the API server answers) and the events client
// (eventRecordQPS, eventBurst), and the serving certificate's manager
// (serverTLSBootstrap).
//
// Interface is the API groups nodelet uses and nothing else: a call to
// another group does not compile. Building the full clientset would link
// every group's typed client into the binary, which every node pays for in
// resident memory.
package apiclient
