package cli

import (
	"time"

	"crawlq/internal/envconfig"
	"crawlq/internal/maintain"
)

// upkeepConfig turns an --upkeep flag and the maintenance environment into what a node or runner
// takes: an upkeep interval (-1: off, for --upkeep 0) and, when upkeep runs and maintenance is
// on, its settings. A negative --upkeep, and bad maintenance settings, are usage errors naming
// the flag or the variable.
func upkeepConfig(upkeep time.Duration, getenv func(string) string) (time.Duration, *maintain.Config, error) {
	if upkeep < 0 {
		return 0, nil, usageErr("--upkeep must be ≥ 0 (0 turns it off), got %s", upkeep)
	}
	if upkeep == 0 {
		return -1, nil, nil
	}
	c, on, err := envconfig.Maintain(envconfig.New(getenv))
	if err != nil {
		return 0, nil, usageErr("%v", err)
	}
	if !on {
		return upkeep, nil, nil
	}
	return upkeep, &c, nil
}
