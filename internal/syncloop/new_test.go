package syncloop

import (
	"testing"

	"github.com/nodelet/nodelet/internal/ctortest"
)

func TestNew(t *testing.T) {
	full := newHarness(t).loop.cfg
	without := func(f func(*Config)) Config {
		c := full
		f(&c)
		return c
	}
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no pods", Config: without(func(c *Config) { c.Pods = nil }), WantErr: "Config needs Pods"},
		{Name: "no view", Config: without(func(c *Config) { c.View = nil }), WantErr: "Config needs Pods, View"},
		{Name: "no workers", Config: without(func(c *Config) { c.Workers = nil }), WantErr: "Workers"},
		{Name: "no admission", Config: without(func(c *Config) { c.Admission = nil }), WantErr: "Admission"},
		{Name: "no statuses", Config: without(func(c *Config) { c.Statuses = nil }), WantErr: "Statuses"},
		{Name: "no admission node", Config: without(func(c *Config) { c.AdmissionNode = nil }), WantErr: "AdmissionNode"},
		{Name: "no recorder", Config: without(func(c *Config) { c.Recorder = nil }), WantErr: "Recorder"},
		{Name: "no release", Config: without(func(c *Config) { c.Release = nil }), WantErr: "Release"},
		{Name: "no redundant", Config: without(func(c *Config) { c.Redundant = nil }), WantErr: "Redundant"},
		{Name: "no relisted", Config: without(func(c *Config) { c.Relisted = nil }), WantErr: "Relisted"},
		{Name: "no pod dirs", Config: without(func(c *Config) { c.Leftovers.PodDirs = nil }), WantErr: "Leftovers"},
		{Name: "no cgroups", Config: without(func(c *Config) { c.Leftovers.Cgroups = nil }), WantErr: "Leftovers"},
		{Name: "no GC back-off", Config: without(func(c *Config) { c.Leftovers.GCBackoff = nil }), WantErr: "Leftovers"},
		{Name: "no sources ready", Config: without(func(c *Config) { c.SourcesReady = nil }), WantErr: "SourcesReady"},
		{Name: "a nil clock is the real one", Config: without(func(c *Config) { c.Clock = nil })},
	}, func(t *testing.T, l *Loop) {
		ctortest.RealClock(t, l.cfg.Clock)
		if l.LastTurn().IsZero() {
			t.Error("no last turn: healthz would see a loop that never turned")
		}
	})
}
