package cli

import (
	"os"
	"strings"
	"time"

	"crawlq/internal/command"
	"crawlq/internal/envconfig"
	"crawlq/internal/maintain"
)

// The long-running commands (crawlq worker, crawlq runner) read their environment once, at their
// start, before they connect to anything: into one struct (serviceEnv; runnerEnv for the runner)
// whose every value is checked, a bad one a usage error naming its variable. What follows reads
// the struct. Only what the command's flags turn on is read, so a bad value of a setting the
// command does not use does not stop it. The database variables are read by dbFlag's read
// (envconfig.ReadDB) at the start of every command that declares one.

// serviceEnv is what a worker or runner process reads from its environment beside the database.
type serviceEnv struct {
	// Every is how often the process maintains the queue and the crawl (--maintain-every); -1:
	// never.
	Every time.Duration
	// Maintain are the retention passes' settings (CRAWLQ_MAINTAIN, CRAWLQ_RETAIN_*), read when
	// maintenance runs; nil: the passes are off.
	Maintain *maintain.Config
	// Events say where run events and monitor metrics go, read when maintenance runs.
	Events eventEnv
	// ProxyEnv are the CRAWLQ_PROXY_* variables spiders' proxies name (crawl.Config.ProxyEnv).
	ProxyEnv map[string]string
}

// eventEnv says where a process's run events and monitor metrics go.
type eventEnv struct {
	// Bus is --event-bus, else CRAWLQ_EVENT_BUS, else the emulator's default bus when
	// AWS_ENDPOINT_URL names one, else off (localEventBus).
	Bus string
	// MetricsNamespace is CRAWLQ_METRICS_NAMESPACE: the monitor metrics' CloudWatch namespace
	// (empty: crawlq), the one the stack's alarms watch.
	MetricsNamespace string
	// MetricsPerSpider is CRAWLQ_METRICS_PER_SPIDER: monitor metrics per spider (else totals).
	// Default true.
	MetricsPerSpider bool
}

// readServiceEnv reads a worker's or runner's environment: maintenance every m (its flag), and
// with maintenance its settings and the events' (busFlag: --event-bus).
func readServiceEnv(env *Env, m *maintainEvery, busFlag string) (serviceEnv, error) {
	var s serviceEnv
	var err error
	if s.Every, s.Maintain, err = maintainConfig(m, env.Getenv); err != nil {
		return s, err
	}
	if s.Every > 0 {
		e := envconfig.New(env.Getenv)
		s.Events = eventEnv{Bus: localEventBus(busFlag, env.Getenv), MetricsNamespace: e.String("CRAWLQ_METRICS_NAMESPACE")}
		if s.Events.MetricsPerSpider, err = e.Bool("CRAWLQ_METRICS_PER_SPIDER", true); err != nil {
			return s, usageErr("%v", err)
		}
	}
	s.ProxyEnv = envconfig.ProxyEnv(env.environ())
	return s, nil
}

// runnerEnv is what crawlq runner reads from its environment beside the database and the flag
// defaults the dispatcher's RunTask overrides set (CRAWLQ_QUEUE and the others: runnerCmd).
type runnerEnv struct {
	serviceEnv
	// RunLogGroup is CRAWLQ_RUN_LOG_GROUP: the CloudWatch Logs group of the runs' logs (the AWS
	// stack sets it); empty: the crawlq_run_log table.
	RunLogGroup string
	// ItemsBucket is CRAWLQ_ITEMS_BUCKET: where the runner puts its items (under items/; the AWS
	// stack's runner_items_to_s3) and keeps failed rendered pages' screenshots and HTML (under
	// artifacts/); empty: both in Postgres.
	ItemsBucket string
	// CommandEnv are the runner's variables its commands see (command.Config.Env):
	// command.DefaultInheritEnv's.
	CommandEnv map[string]string
}

// readRunnerEnv reads crawlq runner's environment (see readServiceEnv).
func readRunnerEnv(env *Env, m *maintainEvery, busFlag string) (runnerEnv, error) {
	s, err := readServiceEnv(env, m, busFlag)
	if err != nil {
		return runnerEnv{}, err
	}
	e := envconfig.New(env.Getenv)
	return runnerEnv{serviceEnv: s, RunLogGroup: e.String("CRAWLQ_RUN_LOG_GROUP"), ItemsBucket: e.String("CRAWLQ_ITEMS_BUCKET"), CommandEnv: commandEnv(env)}, nil
}

// commandEnv are the variables of env a command sees (command.Config.Env).
func commandEnv(env *Env) map[string]string {
	vars := map[string]string{}
	for _, kv := range env.environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	return command.Inherited(func(k string) (string, bool) { v, ok := vars[k]; return v, ok }, command.DefaultInheritEnv)
}

// environ is the whole environment, as "KEY=value" lines: Env.Environ, else os.Environ when
// Getenv is the process's too, else none (a test that substitutes Getenv substitutes the
// environment).
func (e *Env) environ() []string {
	switch {
	case e.Environ != nil:
		return e.Environ()
	case e.getenvIsOS:
		return os.Environ()
	}
	return nil
}
