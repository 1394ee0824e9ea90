// Package status owns pods' API status: it computes a v1.PodStatus from the
// pod spec, what the runtime has (kubecontainer.PodStatus) and what the last
// sync could not do (waiting reasons), following upstream's rules for
// phase, conditions and container states; and it keeps the latest status of
// every pod for whoever reports it (the log in standalone mode, the API
// server in cluster mode). Statuses never go backwards: a terminal phase
// stays terminal. Each stored status has a version that changes only with
// it, so readers that keep what they built from a status (the Syncer's
// resync, the offline checkpoint) compare versions, not statuses.
package status
