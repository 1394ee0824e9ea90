package main

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// criAll is the key of the sum over every CRI method in a count map.
const criAll = "all"

// criCalls reads how many CRI calls containerd has answered so far, by
// method (RunPodSandbox, ListContainers, ImageStatus, ...), from its own
// gRPC server metrics (grpc_server_handled_total of the runtime.v1 services,
// on the stack's containerd metrics endpoint). Nothing sits between an agent
// and containerd to count them, so counting costs the agents nothing. nil
// when the endpoint is not configured or does not answer.
func (h *harness) criCalls() map[string]float64 {
	url := h.env["CONTAINERD_METRICS"]
	if url == "" {
		return nil
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	m, err := parseCRICalls(resp.Body)
	if err != nil {
		return nil
	}
	return m
}

// parseCRICalls sums grpc_server_handled_total over codes for each method
// of the CRI's runtime and image services in a Prometheus text exposition.
func parseCRICalls(r io.Reader) (map[string]float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("containerd metrics: %w", err)
	}
	fam := fams["grpc_server_handled_total"]
	if fam == nil {
		return nil, fmt.Errorf("containerd metrics: no grpc_server_handled_total")
	}
	out := map[string]float64{}
	for _, m := range fam.GetMetric() {
		var service, method string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "grpc_service":
				service = l.GetValue()
			case "grpc_method":
				method = l.GetValue()
			}
		}
		if !strings.HasPrefix(service, "runtime.v1.") {
			continue
		}
		v := m.GetCounter().GetValue()
		out[method] += v
		out[criAll] += v
	}
	return out, nil
}

// criDiff is after - before, keeping only methods that were called.
func criDiff(before, after map[string]float64) map[string]float64 {
	if before == nil || after == nil {
		return nil
	}
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// criMethods are the methods called in any of the count maps, the sum
// last, the others by name.
func criMethods(ms ...map[string]float64) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for k := range m {
			if k != criAll && !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return append(out, criAll)
}
