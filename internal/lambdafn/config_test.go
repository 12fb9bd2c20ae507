package lambdafn_test

import (
	"strings"
	"testing"

	"crawlq/internal/envconfig"
	"crawlq/internal/lambdafn"
)

// TestEachFunctionReadsOnlyItsOwnConfig: a bad value of a variable only one function reads stops
// that function at start, naming the variable, and no other (the functions shared one Config, so
// a bad CRAWLQ_WORKER_MAX, the dispatch tick's, stopped the api, the worker and the metrics
// function too). A bad value every function reads stops each of them.
func TestEachFunctionReadsOnlyItsOwnConfig(t *testing.T) {
	t.Parallel()
	functions := []envconfig.Process{envconfig.API, envconfig.Worker, envconfig.Dispatch, envconfig.Metrics}
	for _, c := range []struct {
		name, value string
		readBy      []envconfig.Process // nil: every function
	}{
		{"CRAWLQ_WORKER_MAX", "many", []envconfig.Process{envconfig.Dispatch}},
		{"CRAWLQ_CRAWL_RUNTIME", "ec2", []envconfig.Process{envconfig.Dispatch}},
		{"CRAWLQ_MAINTAIN_BATCH", "lots", []envconfig.Process{envconfig.Dispatch}},
		{"CRAWLQ_SCRAPYD_USERNAME", "only-a-user", []envconfig.Process{envconfig.API}},
		{"CRAWLQ_METRICS_PER_SPIDER", "maybe", nil},
		{"CRAWLQ_LOG_LEVEL", "loud", nil},
	} {
		env := envconfig.Map(map[string]string{c.name: c.value})
		for _, fn := range functions {
			_, err := lambdafn.LoadFunctionConfig(fn, env)
			stops := c.readBy == nil
			for _, p := range c.readBy {
				stops = stops || p == fn
			}
			switch {
			case stops && (err == nil || !strings.Contains(err.Error(), c.name)):
				t.Errorf("%s=%q: the %s function starts (err %v); want an error naming it", c.name, c.value, fn, err)
			case !stops && err != nil:
				t.Errorf("%s=%q, meant for %v, stops the %s function: %v", c.name, c.value, c.readBy, fn, err)
			}
		}
		// crawlq local runs all four: any of them stops it.
		if _, err := lambdafn.LoadConfig(env); err == nil || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s=%q: LoadConfig %v; want an error naming it", c.name, c.value, err)
		}
	}
	if _, err := lambdafn.LoadFunctionConfig(envconfig.Migrate, envconfig.Map(nil)); err == nil {
		t.Errorf("LoadFunctionConfig(migrate): want an error, migrate has its own setup (envconfig.DBSetup)")
	}
}
