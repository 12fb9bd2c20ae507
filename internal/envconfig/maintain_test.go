package envconfig_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"crawlq/internal/envconfig"
	"crawlq/internal/maintain"
)

// TestMaintain: every maintenance variable's bad value is a maintain.ErrInvalid naming it, and
// good values reach the config.
func TestMaintain(t *testing.T) {
	t.Parallel()
	for env, val := range map[string]string{
		"CRAWLQ_MAINTAIN": "maybe", "CRAWLQ_RETAIN_SUCCEEDED": "1 day", "CRAWLQ_RETAIN_CANCELLED": "-1h", "CRAWLQ_RETAIN_DEAD": "0s",
		"CRAWLQ_RETAIN_RUN_DATA": "10s", "CRAWLQ_RETAIN_IDLE_HOSTS": "5m", "CRAWLQ_MAINTAIN_INTERVAL": "soon", "CRAWLQ_MAINTAIN_BATCH": "12x",
		"CRAWLQ_MAINTAIN_BUDGET": "0",
	} {
		_, _, err := envconfig.Maintain(envconfig.Map(map[string]string{env: val}))
		if !errors.Is(err, maintain.ErrInvalid) || !strings.Contains(err.Error(), env) {
			t.Errorf("%s=%q: got %v, want ErrInvalid naming the variable", env, val, err)
		}
	}
	cfg, on, err := envconfig.Maintain(envconfig.Map(map[string]string{"CRAWLQ_RETAIN_SUCCEEDED": "2h", "CRAWLQ_RETAIN_DEAD": "720h", "CRAWLQ_MAINTAIN_BATCH": "500"}))
	if err != nil || !on || cfg.Succeeded != 2*time.Hour || cfg.Dead != 720*time.Hour || cfg.Batch != 500 {
		t.Errorf("Maintain: %+v %v %v", cfg, on, err)
	}
	if _, on, err := envconfig.Maintain(envconfig.Map(map[string]string{"CRAWLQ_MAINTAIN": "off"})); on || err != nil {
		t.Errorf("CRAWLQ_MAINTAIN=off: on=%v err=%v", on, err)
	}
}
