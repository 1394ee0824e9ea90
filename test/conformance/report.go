package main

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// unbuilt are the images of test/utils/image/manifest.go (v1.37.2) that
// hack/tools/e2eimages does not build offline: a test failing while it
// pulls one of them is not runnable here, for any agent.
var unbuilt = []string{
	"e2e-test-images/nginx", "e2e-test-images/perl",
	"e2e-test-images/ipc-utils", "e2e-test-images/volume/", "e2e-test-images/sample-apiserver",
	"e2e-test-images/apparmor-loader", "e2e-test-images/regression-issue-74839",
	"e2e-test-images/resource-consumer", "e2e-test-images/node-perf/", "e2e-test-images/sample-device-plugin",
	"build-image/distroless-iptables", "sig-storage/nfs-provisioner", "registry.k8s.io/etcd:",
	"gcr.io/k8s-authenticated-test",
}

// ginkgoReport is the part of ginkgo's JSON report read here.
type ginkgoReport struct {
	SuiteSucceeded bool
	SpecReports    []struct {
		ContainerHierarchyTexts    []string
		LeafNodeType               string
		LeafNodeText               string
		State                      string
		RunTime                    time.Duration
		CapturedGinkgoWriterOutput string
		Failure                    struct {
			Message  string
			Location struct {
				FileName   string
				LineNumber int
			}
		}
	}
}

// Test is one test's outcome for one agent.
type Test struct {
	Name    string  `json:"name"`
	State   string  `json:"state"` // passed, failed, not-runnable (and ginkgo's other states)
	Seconds float64 `json:"seconds"`
	// Message is the failure's message (first 1000 bytes); Image the
	// unbuilt image a not-runnable test needed.
	Message string `json:"message,omitempty"`
	Image   string `json:"image,omitempty"`
}

// AgentRun is one agent's run of the suite, with the reruns of some of
// its tests applied.
type AgentRun struct {
	Agent       string  `json:"agent"`
	Version     string  `json:"version"`
	WallSeconds float64 `json:"wallSeconds"`
	Tests       []Test  `json:"tests"`
	Reruns      []Rerun `json:"reruns,omitempty"`
	// Commit is nodelet's commit the run was made from (the harness's, for
	// the upstream kubelet).
	Commit string `json:"commit,omitempty"`
	// Runtime is the CRI runtime's name and version during the full run.
	Runtime string `json:"runtime,omitempty"`
	// Focus is the full run's --focus.
	Focus string `json:"focus,omitempty"`
}

// Rerun is a later run of the tests a focus selected; its outcomes replace
// the full run's.
type Rerun struct {
	When   string   `json:"when"`
	Commit string   `json:"commit,omitempty"`
	Focus  string   `json:"focus"`
	Tests  []string `json:"tests"`
}

func (r *AgentRun) count(state string) int {
	n := 0
	for _, t := range r.Tests {
		if t.State == state {
			n++
		}
	}
	return n
}

func (r *AgentRun) byName() map[string]Test {
	m := make(map[string]Test, len(r.Tests))
	for _, t := range r.Tests {
		m[t.Name] = t
	}
	return m
}

// loadRun reads an agent's run from its folder (report.json, version,
// wall-seconds) and applies its reruns (rerun-*/), oldest first.
func loadRun(dir string) (*AgentRun, error) {
	tests, err := loadTests(dir)
	if err != nil {
		return nil, err
	}
	r := &AgentRun{Agent: filepath.Base(dir), Tests: tests}
	if v, err := os.ReadFile(filepath.Join(dir, "version")); err == nil {
		r.Version = strings.TrimSpace(string(v))
	}
	if w, err := os.ReadFile(filepath.Join(dir, "wall-seconds")); err == nil {
		r.WallSeconds, _ = strconv.ParseFloat(strings.TrimSpace(string(w)), 64)
	}
	r.Commit = readTrim(filepath.Join(dir, "commit"))
	r.Runtime = readTrim(filepath.Join(dir, "runtime"))
	r.Focus = readTrim(filepath.Join(dir, "focus"))
	reruns, _ := filepath.Glob(filepath.Join(dir, "rerun-*", "report.json"))
	sort.Strings(reruns)
	for _, rep := range reruns {
		rd := filepath.Dir(rep)
		tests, err := loadTests(rd)
		if err != nil {
			return nil, err
		}
		focus, _ := os.ReadFile(filepath.Join(rd, "focus"))
		rr := Rerun{When: strings.TrimPrefix(filepath.Base(rd), "rerun-"), Focus: strings.TrimSpace(string(focus)),
			Commit: readTrim(filepath.Join(rd, "commit"))}
		idx := map[string]int{}
		for i, t := range r.Tests {
			idx[t.Name] = i
		}
		for _, t := range tests {
			// Only the full run's selection counts: a rerun's focus may
			// catch tests outside it.
			if i, ok := idx[t.Name]; ok {
				rr.Tests = append(rr.Tests, t.Name)
				r.Tests[i] = t
			}
		}
		r.Reruns = append(r.Reruns, rr)
	}
	sort.Slice(r.Tests, func(i, j int) bool { return r.Tests[i].Name < r.Tests[j].Name })
	return r, nil
}

// loadPublished reads an agent's run as the report published it (path:
// docs/conformance/<agent>.json); nil when there is none.
func loadPublished(path string) (*AgentRun, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r AgentRun
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

func readTrim(path string) string {
	data, _ := os.ReadFile(path)
	return strings.TrimSpace(string(data))
}

// loadTests reads the tests that ran from a folder's ginkgo report.json.
func loadTests(dir string) ([]Test, error) {
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return nil, err
	}
	var reports []ginkgoReport
	if err := json.Unmarshal(data, &reports); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "report.json"), err)
	}
	var out []Test
	for _, rep := range reports {
		for _, s := range rep.SpecReports {
			if s.LeafNodeType != "It" || s.State == "skipped" || s.State == "pending" {
				continue
			}
			t := Test{Name: strings.TrimSpace(strings.Join(append(s.ContainerHierarchyTexts, s.LeafNodeText), " ")),
				State: s.State, Seconds: s.RunTime.Seconds()}
			if s.State != "passed" {
				t.Message = s.Failure.Message
				if len(t.Message) > 1000 {
					t.Message = t.Message[:1000] + " ..."
				}
				for _, img := range unbuilt {
					if strings.Contains(s.Failure.Message, img) || strings.Contains(s.CapturedGinkgoWriterOutput, img) {
						t.State, t.Image = "not-runnable", img
						break
					}
				}
			}
			out = append(out, t)
		}
	}
	return out, nil
}

// writeReportFile writes docs/conformance.md and docs/conformance/<agent>.json.
// runtimeOf names the runtimes the runs were made on.
func runtimeOf(runs []*AgentRun) string {
	var rts []string
	for _, r := range runs {
		v := r.Runtime
		if v == "" {
			v = "containerd 1.6.20 from Debian" // runs made before the runtime was recorded
		}
		if !slices.Contains(rts, v) {
			rts = append(rts, v)
		}
	}
	return strings.Join(rts, ", ")
}

func writeReportFile(o *options, runs []*AgentRun) error {
	dir := filepath.Join(o.docs, "conformance")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, r := range runs {
		data, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, r.Agent+".json"), append(data, '\n'), 0o644); err != nil {
			return err
		}
		if err := writeJUnit(filepath.Join(dir, r.Agent+".junit.xml"), r); err != nil {
			return err
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# NodeConformance: nodelet and the upstream kubelet side by side\n\n")
	fmt.Fprintf(&b, "Written by `make conformance` (test/conformance) on %s: upstream's e2e suite (`e2e.test` %s) run with\n",
		time.Now().UTC().Format("2006-01-02"), versionOf(runs, "upstream"))
	// The full runs' focus: this invocation may be a rerun of a few tests.
	focus := o.focus
	for _, r := range runs {
		if r.Focus != "" {
			focus = r.Focus
			break
		}
	}
	fmt.Fprintf(&b, "`--focus='%s' --skip='%s'` and %d parallel processes against each agent in turn, joined to the\n", focus, o.skip, o.procs)
	fmt.Fprintf(&b, "project's control plane as the same node with the same KubeletConfiguration (test/agent), on this machine (2 cores,\n")
	fmt.Fprintf(&b, "cgroup v1, the stack's runtime: %s). The images are built offline (hack/tools/e2eimages); a test that fails\n", runtimeOf(runs))
	fmt.Fprintf(&b, "pulling an image that is not built here is counted as not runnable. Per-test results: `docs/conformance/<agent>.json` and\n")
	fmt.Fprintf(&b, "`<agent>.junit.xml` beside this page; ginkgo's own reports with every test's output and the agents' logs stay in\n")
	fmt.Fprintf(&b, "`.cache/conformance/` (git-ignored).\n\n")
	b.WriteString("| agent | version | tests | passed | failed | not runnable | wall time |\n|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %s |\n", r.Agent, r.Version, len(r.Tests), r.count("passed"),
			len(r.Tests)-r.count("passed")-r.count("not-runnable"), r.count("not-runnable"),
			(time.Duration(r.WallSeconds) * time.Second).String())
	}
	for _, r := range runs {
		if r.Commit != "" {
			fmt.Fprintf(&b, "\n%s's full run: nodelet's tree at commit %s.", r.Agent, r.Commit)
		}
	}
	b.WriteString("\n")
	for _, r := range runs {
		for _, rr := range r.Reruns {
			commit := ""
			if rr.Commit != "" {
				commit = " at commit " + rr.Commit
			}
			fmt.Fprintf(&b, "\n- %s: %d tests rerun %s%s (`--focus='%s'`); their outcomes replace the full run's.", r.Agent, len(rr.Tests), rr.When, commit, rr.Focus)
		}
	}
	b.WriteString("\n")
	var up, nl *AgentRun
	for _, r := range runs {
		switch r.Agent {
		case "upstream":
			up = r
		case "nodelet":
			nl = r
		}
	}
	if up != nil && nl != nil {
		um, nm := up.byName(), nl.byName()
		var regress, both, onlyUp, notRun []string
		for _, name := range sortedNames(um, nm) {
			u, uok := um[name]
			n, nok := nm[name]
			switch {
			case uok && nok && u.State == "passed" && n.State != "passed":
				regress = append(regress, fmt.Sprintf("- %s\n  - nodelet (%s): %s", name, n.State, oneLine(n.Message)))
			case uok && nok && u.State == "not-runnable" && n.State == "not-runnable":
				notRun = append(notRun, fmt.Sprintf("- %s (needs %s)", name, u.Image))
			case uok && nok && u.State != "passed" && n.State != "passed":
				both = append(both, fmt.Sprintf("- %s\n  - upstream (%s): %s\n  - nodelet (%s): %s%s", name, u.State, oneLine(u.Message), n.State, oneLine(n.Message), knownLimit(name)))
			case uok && nok && u.State != "passed" && n.State == "passed":
				onlyUp = append(onlyUp, fmt.Sprintf("- %s\n  - upstream (%s): %s", name, u.State, oneLine(u.Message)))
			case uok != nok:
				regress = append(regress, fmt.Sprintf("- %s: run for one agent only (upstream %v, nodelet %v)", name, uok, nok))
			}
		}
		section := func(title string, lines []string) {
			fmt.Fprintf(&b, "\n## %s (%d)\n\n", title, len(lines))
			if len(lines) == 0 {
				b.WriteString("None.\n")
				return
			}
			b.WriteString(strings.Join(lines, "\n") + "\n")
		}
		section("Passed by upstream, not by nodelet", regress)
		section("Failed by both agents", both)
		section("Failed by upstream only", onlyUp)
		section("Not runnable here (an image not built offline)", notRun)
	}
	return os.WriteFile(filepath.Join(o.docs, "conformance.md"), []byte(b.String()), 0o644)
}

// knownLimits says why a test fails for every agent on this machine.
var knownLimits = map[string]string{
	"PrivilegedPod should enable privileged commands": "this kernel has no dummy netdev: `ip link add dummy1 type dummy` is refused for any agent",
	"should not write to root filesystem": "the e2e busybox image's sh is this machine's bash (Debian's busybox 1.35 ash drops environment " +
		"variables such as `data-1`, which the real image's busybox 1.37 keeps and two env tests read), and bash words the " +
		"read-only error differently from ash",
}

func knownLimit(name string) string {
	for k, why := range knownLimits {
		if strings.Contains(name, k) {
			return "\n  - why: " + why
		}
	}
	return ""
}

// junit is the JUnit XML of a run: each test with its time and failure
// message (ginkgo's own report, with every test's output, stays in --out).
type junitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     float64     `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name    string        `xml:"name,attr"`
	Time    float64       `xml:"time,attr"`
	Failure *junitFailure `xml:"failure,omitempty"`
	Skipped *junitFailure `xml:"skipped,omitempty"`
}

type junitFailure struct {
	Type    string `xml:"type,attr"`
	Message string `xml:",chardata"`
}

func writeJUnit(path string, r *AgentRun) error {
	s := junitSuite{Name: "NodeConformance " + r.Agent + " " + r.Version, Tests: len(r.Tests), Time: r.WallSeconds}
	for _, t := range r.Tests {
		c := junitCase{Name: t.Name, Time: t.Seconds}
		switch t.State {
		case "passed":
		case "not-runnable":
			c.Skipped = &junitFailure{Type: "not-runnable", Message: "needs " + t.Image}
			s.Skipped++
		default:
			c.Failure = &junitFailure{Type: t.State, Message: t.Message}
			s.Failures++
		}
		s.Cases = append(s.Cases, c)
	}
	data, err := xml.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), append(data, '\n')...), 0o644)
}

func versionOf(runs []*AgentRun, agent string) string {
	for _, r := range runs {
		if r.Agent == agent {
			return strings.TrimPrefix(r.Version, "Kubernetes ")
		}
	}
	return "?"
}

func sortedNames(ms ...map[string]Test) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for n := range m {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

// oneLine is a failure message on one line, at most 400 bytes.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + " ..."
	}
	if s == "" {
		s = "(no message)"
	}
	return s
}
