// Package serviceenv owns the node's view of the cluster's Services: an
// informer on every Service, and the service environment variables
// ({NAME}_SERVICE_HOST, {NAME}_SERVICE_PORT, the Docker link variables)
// that containers get, as the upstream kubelet computes them.
package serviceenv
