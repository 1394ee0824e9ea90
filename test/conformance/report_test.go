package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spec is one SpecReport of ginkgo's JSON report.
func spec(leaf, state, msg, output string) map[string]any {
	return map[string]any{"ContainerHierarchyTexts": []string{"[sig-node] Pods"}, "LeafNodeType": "It", "LeafNodeText": leaf,
		"State": state, "RunTime": 2e9, "Failure": map[string]any{"Message": msg}, "CapturedGinkgoWriterOutput": output}
}

func writeReport(t *testing.T, dir string, specs ...map[string]any) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal([]map[string]any{{"SuiteSucceeded": false, "SpecReports": append(specs,
		map[string]any{"LeafNodeType": "SynchronizedBeforeSuite", "State": "passed"},
		map[string]any{"LeafNodeType": "It", "LeafNodeText": "not selected", "State": "skipped"})}})
	if err := os.WriteFile(filepath.Join(dir, "report.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReport(t *testing.T) {
	out := t.TempDir()
	writeReport(t, filepath.Join(out, "upstream"),
		spec("a", "passed", "", ""), spec("b", "passed", "", ""),
		spec("nginx", "failed", "timed out", `Failed to pull image "registry.k8s.io/e2e-test-images/nginx:1.27.0-2"`),
		spec("both", "failed", "no dummy netdev", ""))
	writeReport(t, filepath.Join(out, "nodelet"),
		spec("a", "passed", "", ""), spec("b", "failed", "expected\nPodInitializing", ""),
		spec("nginx", "failed", "timed out", `image "registry.k8s.io/e2e-test-images/nginx:1.27.0-2" ErrImagePull`),
		spec("both", "failed", "no dummy netdev", ""))
	// A later rerun of b for nodelet replaces its outcome.
	writeReport(t, filepath.Join(out, "nodelet", "rerun-20261201T120000"), spec("b", "passed", "", ""),
		spec("outside the selection", "failed", "no kube-proxy", ""))
	_ = os.WriteFile(filepath.Join(out, "nodelet", "rerun-20261201T120000", "focus"), []byte("b\n"), 0o644)

	var runs []*AgentRun
	for _, a := range []string{"upstream", "nodelet"} {
		r, err := loadRun(filepath.Join(out, a))
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	up, nl := runs[0], runs[1]
	if len(up.Tests) != 4 || up.count("passed") != 2 || up.count("not-runnable") != 1 {
		t.Fatalf("upstream: %+v", up.Tests)
	}
	if nl.count("passed") != 2 || len(nl.Reruns) != 1 || nl.Reruns[0].Focus != "b" {
		t.Fatalf("nodelet after the rerun: %+v %+v", nl.Tests, nl.Reruns)
	}
	docs := t.TempDir()
	if err := writeDocs(docs, runs); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(docs, "conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| upstream |  | 4 | 2 | 1 | 1 |",
		"| nodelet |  | 4 | 2 | 1 | 1 |",
		"## Passed by upstream, not by nodelet (0)",
		"## Failed by both agents (1)\n\n- [sig-node] Pods both",
		"## Not runnable here (an image not built offline) (1)\n\n- [sig-node] Pods nginx (needs e2e-test-images/nginx)",
		"- nodelet: 1 tests rerun 20261201T120000",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("conformance.md lacks %q:\n%s", want, md)
		}
	}
}

func writeDocs(docs string, runs []*AgentRun) error {
	return writeReportFile(&options{docs: docs, focus: "f", skip: "s", procs: 4}, runs)
}

// TestLoadPublished: a run the report published reads back as it was; no
// file is no run.
func TestLoadPublished(t *testing.T) {
	dir := t.TempDir()
	want := &AgentRun{Agent: "upstream", Version: "kubernetes v1.37.2", WallSeconds: 2014, Commit: "558f71a",
		Tests:  []Test{{Name: "[sig-node] Pods x [NodeConformance]", State: "passed", Seconds: 1.5}},
		Reruns: []Rerun{{When: "20261201T130548", Focus: "x", Tests: []string{"[sig-node] Pods x [NodeConformance]"}}}}
	data, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "upstream.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := loadPublished(path)
	if err != nil || got == nil || got.Commit != "558f71a" || len(got.Tests) != 1 || got.Tests[0] != want.Tests[0] || len(got.Reruns) != 1 {
		t.Fatalf("loadPublished = %+v, %v", got, err)
	}
	if got, err := loadPublished(filepath.Join(dir, "nodelet.json")); got != nil || err != nil {
		t.Errorf("no file: %+v, %v", got, err)
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadPublished(path); err == nil {
		t.Error("a broken file read without an error")
	}
}
