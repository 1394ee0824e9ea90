package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/server/flagz"
	"k8s.io/apiserver/pkg/server/statusz"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/compatibility"

	"github.com/nodelet/nodelet/internal/version"
)

// componentName is what /flagz and /statusz name: the kubelet, as upstream.
const componentName = "kubelet"

// pathsMux is a ServeMux that remembers the paths it serves, for /statusz's
// list.
type pathsMux struct {
	*http.ServeMux
	paths []string
}

func (m *pathsMux) Handle(pattern string, h http.Handler) {
	m.ServeMux.Handle(pattern, h)
	m.record(pattern)
}

func (m *pathsMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.ServeMux.HandleFunc(pattern, h)
	m.record(pattern)
}

// record keeps the pattern's path without its method and wildcards, as
// upstream's restful container lists its routes' roots.
func (m *pathsMux) record(pattern string) {
	if _, p, ok := strings.Cut(pattern, " "); ok {
		pattern = p
	}
	if i := strings.Index(pattern, "{"); i >= 0 {
		pattern = pattern[:i]
	}
	if pattern = strings.TrimSuffix(pattern, "/"); pattern == "" {
		pattern = "/"
	}
	if !slices.Contains(m.paths, pattern) {
		m.paths = append(m.paths, pattern)
	}
}

// installZPages serves /flagz (the command line's flags and values) and,
// last so that it lists every path, /statusz, with k8s.io/apiserver's
// handlers as upstream's InstallZPages (gates ComponentFlagz and
// ComponentStatusz, beta and on).
func (s *Server) installZPages(m *pathsMux) {
	gates := s.cfg.Kubelet.FeatureGates
	on := func(name string) bool { v, set := gates[name]; return v || !set }
	if on("ComponentFlagz") && s.cfg.Flags != nil {
		flagz.Install(m, componentName, flagz.NamedFlagSetsReader{FlagSets: cliflag.NamedFlagSets{
			Order: []string{"generic"}, FlagSets: map[string]*pflag.FlagSet{"generic": s.cfg.Flags}}})
		m.record(flagz.DefaultFlagzPath)
	}
	if on("ComponentStatusz") {
		m.record(statusz.DefaultStatuszPath)
		ev := compatibility.NewEffectiveVersionFromString(strings.TrimPrefix(version.Kubelet, "v"), "", "")
		statusz.Install(m, componentName, statusz.NewRegistry(ev, statusz.WithListedPaths(slices.Clone(m.paths))))
	}
}
