package benchkit

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "benchmarks.md")
	page := "# Benchmarks\n\n<!-- x: begin (bench/x) -->\nold\n<!-- x: end -->\n\n## Raw output\n"
	if err := os.WriteFile(doc, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &Program{Name: "x", Out: filepath.Join(dir, "results", "x.json"), Section: filepath.Join(dir, "results", "x.md"), Doc: doc}
	type result struct {
		Agent string `json:"agent"`
	}
	if err := p.Write([]result{{"upstream"}, {"nodelet"}}, "## X\n\nnew\n"); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		p.Out:     "[\n  {\n    \"agent\": \"upstream\"\n  },\n  {\n    \"agent\": \"nodelet\"\n  }\n]\n",
		p.Section: "## X\n\nnew\n",
		doc:       "# Benchmarks\n\n<!-- x: begin (bench/x) -->\n## X\n\nnew\n<!-- x: end -->\n\n## Raw output\n",
	} {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s:\n%s\nwant\n%s", filepath.Base(path), got, want)
		}
	}
	var back []result
	if err := p.LoadResults(&back); err != nil || len(back) != 2 || back[1].Agent != "nodelet" {
		t.Errorf("LoadResults = %v, %v", back, err)
	}
}

func TestSpliceInserts(t *testing.T) {
	for _, tc := range []struct{ page, want string }{
		{"# B\n\n## Raw output\n", "# B\n\n<!-- y: begin (bench/y) -->\ns\n<!-- y: end -->\n\n## Raw output\n"},
		{"# B\n", "# B\n\n<!-- y: begin (bench/y) -->\ns\n<!-- y: end -->\n"},
	} {
		doc := filepath.Join(t.TempDir(), "page.md")
		if err := os.WriteFile(doc, []byte(tc.page), 0o644); err != nil {
			t.Fatal(err)
		}
		begin, end := (&Program{Name: "y"}).markers()
		if err := splice(doc, begin, end, "s\n"); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(doc); string(got) != tc.want {
			t.Errorf("splice into %q:\n%s\nwant\n%s", tc.page, got, tc.want)
		}
	}
}

// hack/bench.sh writes the markers around each program's section itself:
// they must be the ones the programs splice between.
func TestMarkersMatchBenchScript(t *testing.T) {
	script, err := os.ReadFile("../../../hack/bench.sh")
	if err != nil {
		t.Fatal(err)
	}
	programs := regexp.MustCompile(`go run \./bench/([a-z]+)`).FindAllStringSubmatch(string(script), -1)
	if len(programs) == 0 {
		t.Fatal("no go run ./bench/... in hack/bench.sh")
	}
	for _, m := range programs {
		begin, end := (&Program{Name: m[1]}).markers()
		if !strings.Contains(string(script), `echo "`+begin+`"`) || !strings.Contains(string(script), `echo "`+end+`"`) {
			t.Errorf("hack/bench.sh lacks %s ... %s", begin, end)
		}
	}
}
