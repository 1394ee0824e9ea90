package process

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSetOOMScoreAdj(t *testing.T) {
	path := filepath.Join(t.TempDir(), "oom_score_adj")
	if err := os.WriteFile(path, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := setOOMScoreAdj(path, -999); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); strings.TrimSpace(string(got)) != "-999" {
		t.Fatalf("oom_score_adj %q, want -999", got)
	}
	if err := setOOMScoreAdj(path, -1001); err == nil {
		t.Fatal("out of range accepted")
	}
}
