package kuberuntime

import (
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kubecontainer"
)

// Upstream's limits on termination messages.
const (
	maxMessageBytes = 4096
	maxLogTailBytes = 2048
	maxLogTailLines = 80
)

// terminationMessage is an exited container's message, as upstream: the
// termination message file if it has anything, else the runtime's message,
// else (FallbackToLogsOnError, failed) the tail of its log.
func terminationMessage(cs *kubecontainer.ContainerStatus) string {
	msg := cs.Message
	if p := cs.TerminationMessageHostPath; p != "" {
		if data, err := readLimited(p, maxMessageBytes); err == nil && len(data) > 0 {
			return string(data)
		}
	}
	if msg == "" && cs.TerminationMessagePolicy == string(v1.TerminationMessageFallbackToLogsOnError) && cs.ExitCode != 0 {
		msg = tailLog(cs.LogPath)
	}
	return msg
}

func readLimited(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	k, _ := f.Read(buf)
	return buf[:k], nil
}

// tailLog returns the last lines of a CRI log file, content only.
func tailLog(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > maxLogTailLines {
		lines = lines[len(lines)-maxLogTailLines:]
	}
	var b strings.Builder
	for _, l := range lines {
		// <time> <stream> <tag> <content>
		parts := strings.SplitN(l, " ", 4)
		if len(parts) == 4 {
			b.WriteString(parts[3])
			if parts[2] == "F" {
				b.WriteByte('\n')
			}
		}
	}
	s := b.String()
	if len(s) > maxLogTailBytes {
		s = s[len(s)-maxLogTailBytes:]
	}
	return s
}
