package envconfig

import (
	"fmt"
	"strings"
	"time"

	"crawlq/internal/maintain"
)

// maintainVars pairs each maintenance variable with the maintain.Config field it sets, so an
// error of maintain's Validate can name the variable.
var maintainVars = []struct{ env, field string }{
	{"CRAWLQ_RETAIN_SUCCEEDED", "Succeeded"}, {"CRAWLQ_RETAIN_CANCELLED", "Cancelled"}, {"CRAWLQ_RETAIN_DEAD", "Dead"},
	{"CRAWLQ_RETAIN_RUN_DATA", "RunData"}, {"CRAWLQ_RETAIN_IDLE_HOSTS", "IdleHosts"},
	{"CRAWLQ_MAINTAIN_INTERVAL", "Interval"}, {"CRAWLQ_MAINTAIN_BATCH", "Batch"}, {"CRAWLQ_MAINTAIN_BUDGET", "Budget"},
}

// Maintain reads the automatic maintenance settings (Terraform sets them on the dispatch
// function; crawlq worker, runner and local read them too); on is false when CRAWLQ_MAINTAIN is
// off. Unset variables take maintain's defaults; a bad value is a maintain.ErrInvalid naming its
// variable.
func Maintain(env Env) (cfg maintain.Config, on bool, err error) {
	if on, err = env.OnOff("CRAWLQ_MAINTAIN"); err != nil || !on {
		if err != nil {
			err = fmt.Errorf("%w: %w", maintain.ErrInvalid, err)
		}
		return maintain.Config{}, false, err
	}
	durs := []struct {
		name string
		dst  *time.Duration
	}{
		{"CRAWLQ_RETAIN_SUCCEEDED", &cfg.Succeeded}, {"CRAWLQ_RETAIN_CANCELLED", &cfg.Cancelled}, {"CRAWLQ_RETAIN_DEAD", &cfg.Dead},
		{"CRAWLQ_RETAIN_RUN_DATA", &cfg.RunData}, {"CRAWLQ_RETAIN_IDLE_HOSTS", &cfg.IdleHosts},
		{"CRAWLQ_MAINTAIN_INTERVAL", &cfg.Interval}, {"CRAWLQ_MAINTAIN_BUDGET", &cfg.Budget},
	}
	for _, d := range durs {
		if *d.dst, err = env.Duration(d.name, 0); err != nil {
			return maintain.Config{}, false, fmt.Errorf("%w: %w", maintain.ErrInvalid, err)
		}
	}
	if cfg.Batch, err = env.PositiveInt("CRAWLQ_MAINTAIN_BATCH", 0); err != nil {
		return maintain.Config{}, false, fmt.Errorf("%w: %w", maintain.ErrInvalid, err)
	}
	if err := cfg.WithDefaults().Validate(); err != nil {
		return maintain.Config{}, false, maintainVarName(err)
	}
	return cfg, true, nil
}

// maintainVarName rewrites a Validate error to name the variable rather than the field.
func maintainVarName(err error) error {
	s := err.Error()
	for _, v := range maintainVars {
		if rest, ok := strings.CutPrefix(s, maintain.ErrInvalid.Error()+": "+v.field+" "); ok {
			return fmt.Errorf("%w: %s: %s", maintain.ErrInvalid, v.env, rest)
		}
	}
	return err
}
