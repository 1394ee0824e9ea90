package config

import (
	"flag"
	"sync"

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
