// Package nodelog owns the kubelet API's node log query (KEP-2258,
// NodeLogQuery, GA and locked on since 1.36): with enableSystemLogQuery,
// GET /logs/?query=SERVICE[&sinceTime=&untilTime=&tailLines=&pattern=&boot=]
// returns a service's journal through journalctl (the service's log file
// under /var/log when journald does not know it), and /logs/?query=FILE a
// file under /var/log, with upstream's parameters, validation, messages and
// status codes. Without a query, /logs/ serves the log directory as before.
//
// Parsing and validation are pure functions; the handler runs journalctl
// with the kubelet's privileges, as upstream's does, and never a shell.
package nodelog
