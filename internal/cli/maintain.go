package cli

import (
	"flag"
	"time"

	"crawlq/internal/envconfig"
	"crawlq/internal/maintain"
)

// maintainEvery is --maintain-every: how often a worker or runner maintains the queue and the
// crawl. --upkeep, its old name, sets the same value, so scripts that pass it keep working.
type maintainEvery struct {
	every time.Duration
	fs    *flag.FlagSet
}

// maintainFlag declares --maintain-every (and --upkeep) on fs, def by default.
func maintainFlag(fs *flag.FlagSet, def time.Duration, usage string) *maintainEvery {
	m := &maintainEvery{every: def, fs: fs}
	fs.DurationVar(&m.every, "maintain-every", def, usage)
	fs.DurationVar(&m.every, "upkeep", def, "old name of --maintain-every")
	return m
}

// name is the flag the user gave: --upkeep when that was the one.
func (m *maintainEvery) name() string {
	name := "--maintain-every"
	m.fs.Visit(func(f *flag.Flag) {
		if f.Name == "upkeep" {
			name = "--upkeep"
		}
	})
	return name
}

// maintainConfig turns --maintain-every and the maintenance environment into what a node or
// runner takes: a maintenance interval (-1: off, for 0) and, when maintenance runs and the
// retention passes are on (CRAWLQ_MAINTAIN), their settings. A negative interval, and bad
// settings, are usage errors naming the flag or the variable.
func maintainConfig(m *maintainEvery, getenv func(string) string) (time.Duration, *maintain.Config, error) {
	every := m.every
	if every < 0 {
		return 0, nil, usageErr("%s must be ≥ 0 (0 turns it off), got %s", m.name(), every)
	}
	if every == 0 {
		return -1, nil, nil
	}
	c, on, err := envconfig.Maintain(envconfig.New(getenv))
	if err != nil {
		return 0, nil, usageErr("%v", err)
	}
	if !on {
		return every, nil, nil
	}
	return every, &c, nil
}
