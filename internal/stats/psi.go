package stats

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/cgroups"
	"github.com/nodelet/nodelet/internal/machine"
)

// parsePSI parses a cgroup v2 pressure file (cpu.pressure, memory.pressure,
// io.pressure) as runc's fs2 statPSI does (github.com/opencontainers/cgroups,
// which cadvisor reads them with; its parser is unexported):
//
//	some avg10=1.71 avg60=2.36 avg300=2.57 total=230548833
//	full avg10=1.00 avg60=1.01 avg300=1.00 total=157622356
//
// Other lines and keys are ignored (cpu.pressure has no "full" line before
// Linux 5.13: it stays zero); a malformed pair is an error. Total is the
// kernel's cumulative stall time in microseconds, kept as is, as cadvisor
// and upstream's kubelet pass it on; the averages are percentages.
func parsePSI(r io.Reader) (*statsv1alpha1.PSIStats, error) {
	var out statsv1alpha1.PSIStats
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		var d *statsv1alpha1.PSIData
		switch f[0] {
		case "some":
			d = &out.Some
		case "full":
			d = &out.Full
		default:
			continue
		}
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("invalid psi data: %q", kv)
			}
			var err error
			switch k {
			case "total":
				d.Total, err = strconv.ParseUint(v, 10, 64)
			case "avg10":
				d.Avg10, err = strconv.ParseFloat(v, 64)
			case "avg60":
				d.Avg60, err = strconv.ParseFloat(v, 64)
			case "avg300":
				d.Avg300, err = strconv.ParseFloat(v, 64)
			}
			if err != nil {
				return nil, fmt.Errorf("invalid %s PSI value: %w", k, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return &out, nil
}

// readPSI reads a pressure file: nil, nil where the kernel gives none, as
// runc: no file (cgroup v1, a kernel before 4.20 or without CONFIG_PSI, PSI
// turned off for the cgroup with cgroup.pressure), or ENOTSUP on read (PSI
// compiled in but not enabled: the psi=1 boot parameter).
func readPSI(file string) (*statsv1alpha1.PSIStats, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTSUP) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p, err := parsePSI(strings.NewReader(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}

// summaryPSI is a cgroup's pressure file as the summary reports it: zero,
// not nil, where the kernel gives none (cgroup v1 included). Upstream's
// kubelet converts cAdvisor's PSI, a value that runc leaves zero then, and
// its node e2e test expects PSI present on every node.
func summaryPSI(cg machine.Cgroups, id, file string) (*statsv1alpha1.PSIStats, error) {
	if !cg.V2 {
		return &statsv1alpha1.PSIStats{}, nil
	}
	p, err := readPSI(filepath.Join(cg.Dir("", id), file))
	if p == nil {
		p = &statsv1alpha1.PSIStats{}
	}
	return p, err
}

// pressure is a cgroup's PSI for the summary.
type pressure struct {
	cpu, memory, io *statsv1alpha1.PSIStats
}

// readPressure reads the three pressure files of cgroup id (as summaryPSI).
func readPressure(cg machine.Cgroups, id string) (pressure, error) {
	var errs []error
	read := func(file string) *statsv1alpha1.PSIStats {
		p, err := summaryPSI(cg, id, file)
		if err != nil {
			errs = append(errs, err)
		}
		return p
	}
	return pressure{cpu: read("cpu.pressure"), memory: read("memory.pressure"), io: read("io.pressure")}, errors.Join(errs...)
}

// psiEnabled reports whether the kernel has PSI for cgroups, as upstream's
// kubelet decides to serve cadvisor's pressure metrics: the root cgroup of
// the unified hierarchy has cpu.pressure (never on v1 or hybrid).
func psiEnabled(cg machine.Cgroups) bool {
	if !cg.V2 || cg.Mount == "" {
		return false
	}
	_, err := os.Stat(filepath.Join(cg.Mount, "cpu.pressure"))
	return err == nil
}

// criPSI converts the runtime's PSI, if it gives one, as upstream's
// makePSIStats.
func criPSI(p *runtimeapi.PsiStats) *statsv1alpha1.PSIStats {
	if p == nil {
		return nil
	}
	conv := func(d *runtimeapi.PsiData) statsv1alpha1.PSIData {
		if d == nil {
			return statsv1alpha1.PSIData{}
		}
		return statsv1alpha1.PSIData{Total: d.Total, Avg10: d.Avg10, Avg60: d.Avg60, Avg300: d.Avg300}
	}
	return &statsv1alpha1.PSIStats{Full: conv(p.Full), Some: conv(p.Some)}
}

// podCgroups indexes the cgroups below the pods' cgroup (the ids of
// podCgroupIDs) by owner: pods by UID, sandboxes and containers by runtime
// ID.
type podCgroups struct {
	byUID, byID map[string]string
}

func indexPodCgroups(ids []string) podCgroups {
	out := podCgroups{byUID: map[string]string{}, byID: map[string]string{}}
	for _, id := range ids {
		base := path.Base(id)
		if uid, ok := cgroups.PodUIDFromDir(base); ok {
			if _, dup := out.byUID[string(uid)]; !dup {
				out.byUID[string(uid)] = id
			}
			continue
		}
		// CRI-O's conmon has a scope of its own named after the container.
		if strings.Contains(base, "conmon") {
			continue
		}
		if m := containerIDPattern.FindString(base); m != "" {
			if _, dup := out.byID[m]; !dup {
				out.byID[m] = id
			}
		}
	}
	return out
}
