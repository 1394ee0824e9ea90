package process

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Settings are what Apply sets; a nil field is left alone.
type Settings struct {
	// OOMScoreAdj is written to /proc/self/oom_score_adj.
	OOMScoreAdj *int32
	// MaxOpenFiles is the soft and hard RLIMIT_NOFILE.
	MaxOpenFiles *int64
}

// Apply sets s on the running process, logging what failed.
func Apply(ctx context.Context, s Settings) {
	logger := klog.FromContext(ctx)
	if s.OOMScoreAdj != nil {
		if err := setOOMScoreAdj("/proc/self/oom_score_adj", *s.OOMScoreAdj); err != nil {
			logger.Error(err, "Failed to apply oomScoreAdj to nodelet's own process", "oomScoreAdj", *s.OOMScoreAdj)
		}
	}
	if s.MaxOpenFiles != nil {
		if err := setMaxOpenFiles(uint64(*s.MaxOpenFiles)); err != nil {
			logger.Error(err, "Failed to set rlimit on max file handles", "maxOpenFiles", *s.MaxOpenFiles)
		}
	}
}

// setOOMScoreAdj writes v to path (an oom_score_adj file) unless it holds
// v already.
func setOOMScoreAdj(path string, v int32) error {
	if v < -1000 || v > 1000 {
		return fmt.Errorf("oomScoreAdj %d out of [-1000, 1000]", v)
	}
	if cur, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(cur)) == strconv.Itoa(int(v)) {
		return nil
	}
	return os.WriteFile(path, []byte(strconv.Itoa(int(v))), 0o644)
}

func setMaxOpenFiles(n uint64) error {
	return unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n})
}
