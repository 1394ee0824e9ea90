// Package healthz owns the plain-http health endpoint (127.0.0.1:10248 by
// default): /healthz answers "ok" while every registered check passes, and
// 500 with the failing checks otherwise.
package healthz
