// Package cli owns nodelet's command line for the node's operator: `nodelet
// pods`, `nodelet logs`, ... It talks to a running nodelet through its
// local API (the kubelet API without TLS on <root-dir>/nodelet.sock, root
// only) and prints what the kubelet knows, in kubectl's conventions. What
// a pod's row says (READY, STATUS, RESTARTS) is a pure function (podRow),
// kubectl's own rules.
package cli
