package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"strings"
	"time"
)

// auditEvent is the part of an audit.k8s.io/v1 Event the counts need.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// API request classes counted per burst (bench/compare's report names).
const (
	apiStatusPatches = "pod-status-writes"
	apiEvents        = "event-writes"
	apiTokens        = "token-requests"
	apiOtherWrites   = "other-writes"
	apiReads         = "reads"
	apiWrites        = "writes"
	apiAll           = "all"
)

// auditOffset is the audit log's current size: where a measurement's
// requests start.
func (h *harness) auditOffset() int64 {
	fi, err := os.Stat(h.env["AUDIT_LOG"])
	if err != nil {
		return 0
	}
	return fi.Size()
}

// apiRequests counts the requests the agent's node identity made between
// from and to, reading the audit log from offset (the API server's audit
// policy records every request of the system:nodes group). A rotated log
// (the API server keeps it under 100 MB) starts over from the top.
func (h *harness) apiRequests(offset int64, from, to time.Time) map[string]float64 {
	f, err := os.Open(h.env["AUDIT_LOG"])
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() < offset {
		offset = 0
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil
	}
	return countRequests(f, "system:node:"+h.o.Node, from, to)
}

// countRequests classifies the audit events of user in [from, to].
func countRequests(r io.Reader, user string, from, to time.Time) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.User.Username != user {
			continue
		}
		if ev.RequestReceivedTimestamp.Before(from) || ev.RequestReceivedTimestamp.After(to) {
			continue
		}
		c := classify(ev)
		out[c]++
		if strings.HasPrefix(c, apiOtherWrites+":") {
			out[apiOtherWrites]++
		}
		out[apiAll]++
		if ev.Verb != "get" && ev.Verb != "list" && ev.Verb != "watch" {
			out[apiWrites]++
		}
	}
	return out
}

func classify(ev auditEvent) string {
	var res, sub string
	if ev.ObjectRef != nil {
		res, sub = ev.ObjectRef.Resource, ev.ObjectRef.Subresource
	}
	switch {
	case ev.Verb == "get" || ev.Verb == "list" || ev.Verb == "watch":
		return apiReads
	case res == "pods" && sub == "status":
		return apiStatusPatches
	case res == "events":
		return apiEvents
	case res == "serviceaccounts" && sub == "token":
		return apiTokens
	default:
		return apiOtherWrites + ":" + strings.Trim(res+"/"+sub, "/") + ":" + ev.Verb
	}
}
