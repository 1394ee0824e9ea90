// Package apiserver owns the API server pod source: a client-go informer on
// the pods bound to this node (field selector spec.nodeName). It sends the
// full set of non-mirror pods once the informer has synced (so consumers
// know the source has been seen), then one update per added, changed or
// deleted pod. Changes that only touch status or the resource version (our
// own status patches among them) are not sent, except a change of a
// readiness gate's condition. Mirror pods (the API copies
// of static pods) are sent apart, on their own channel, for the mirror
// manager. The informer's store is exposed as a lister.
package apiserver
