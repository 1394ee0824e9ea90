// Package logs owns the rotation of CRI container log files on the node, with
// the semantics of the upstream kubelet's container log manager.
//
// Every containerLogMonitorInterval, Manager lists the running containers,
// asks the runtime for each one's log path and, when the current log has
// reached containerLogMaxSize, rotates it: leftovers of an interrupted
// rotation are removed, the oldest rotated files are removed so that at most
// containerLogMaxFiles-1 remain afterwards, every rotated file but the newest
// is gzip-compressed, and the current log is renamed to
// "<log>.<YYYYMMDD-hhmmss>" before the runtime is asked to reopen it
// (ReopenContainerLog). If the runtime cannot reopen the log, the rename is
// undone so the next pass can try again. Up to containerLogMaxWorkers
// containers are processed at once.
//
// What it owns: the rotated files "<log>.*" next to each container's current
// log, including their removal when the container is removed (Clean). It does
// not own the current log file itself: the runtime writes it and whoever
// removes the container removes it.
package logs
