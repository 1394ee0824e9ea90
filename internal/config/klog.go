package config

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync"

	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
)

var (
	klogOnce sync.Once
	klogFS   *flag.FlagSet
)

// klogFlagSet returns klog's flags (-v, --vmodule, ...), registered once.
func klogFlagSet() *flag.FlagSet {
	klogOnce.Do(func() {
		klogFS = flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(klogFS)
	})
	return klogFS
}

// applyLogging applies the configuration's logging.verbosity and
// logging.vmodule to klog, each unless its flag (-v, --vmodule) was given:
// flags win over the file, as upstream.
func applyLogging(l *logsapi.LoggingConfiguration, vGiven, vmoduleGiven bool) error {
	fs := klogFlagSet()
	if !vGiven && l.Verbosity != 0 {
		if err := fs.Set("v", strconv.Itoa(int(l.Verbosity))); err != nil {
			return fmt.Errorf("logging.verbosity: %w", err)
		}
	}
	if !vmoduleGiven && len(l.VModule) > 0 {
		parts := make([]string, 0, len(l.VModule))
		for _, m := range l.VModule {
			parts = append(parts, fmt.Sprintf("%s=%d", m.FilePattern, m.Verbosity))
		}
		if err := fs.Set("vmodule", strings.Join(parts, ",")); err != nil {
			return fmt.Errorf("logging.vmodule: %w", err)
		}
	}
	return nil
}
