package kuberuntime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/internal/kubecontainer"
)

func TestTerminationMessage(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	msgFile := write("msg", "from the file")
	empty := write("empty", "")
	big := write("big", strings.Repeat("x", 5000))
	log := write("log", "2026-12-01T00:00:00Z stdout F first line\n2026-12-01T00:00:01Z stderr P part \n2026-12-01T00:00:02Z stderr F two\n")
	fallback := "FallbackToLogsOnError"
	tests := []struct {
		name string
		cs   kubecontainer.ContainerStatus
		want string
	}{
		{"file", kubecontainer.ContainerStatus{TerminationMessageHostPath: msgFile, Message: "runtime"}, "from the file"},
		{"empty file: the runtime's message", kubecontainer.ContainerStatus{TerminationMessageHostPath: empty, Message: "runtime"}, "runtime"},
		{"file cut at 4096 bytes", kubecontainer.ContainerStatus{TerminationMessageHostPath: big}, strings.Repeat("x", 4096)},
		{"log tail on failure", kubecontainer.ContainerStatus{TerminationMessageHostPath: empty, TerminationMessagePolicy: fallback, ExitCode: 1, LogPath: log},
			"first line\npart two\n"},
		{"no log tail on success", kubecontainer.ContainerStatus{TerminationMessageHostPath: empty, TerminationMessagePolicy: fallback, LogPath: log}, ""},
		{"no log tail with File policy", kubecontainer.ContainerStatus{TerminationMessagePolicy: "File", ExitCode: 1, LogPath: log}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := terminationMessage(&tt.cs); got != tt.want {
				t.Errorf("terminationMessage = %q, want %q", got, tt.want)
			}
		})
	}
}
