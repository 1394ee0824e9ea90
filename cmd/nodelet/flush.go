package main

import "k8s.io/klog/v2"

// flushLogs writes out what klog buffered (--log-file). klog.Flush is no
// logging call but not on logcheck's list of the klog functions contextual
// code may use, so it lives alone in this file, which hack/logcheck.conf
// exempts from the contextual check; everything else in cmd/ and internal/
// logs through the logger in its context.
func flushLogs() { klog.Flush() }
