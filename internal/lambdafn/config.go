package lambdafn

import (
	"fmt"
	"strings"

	"crawlq/internal/envconfig"
	"crawlq/internal/events"
	"crawlq/internal/maintain"
	"crawlq/internal/scrapyd"
)

// Config is what the functions' environment (the contract Terraform sets) says; the loaders here
// are the one place in this package that reads it. Each function reads and checks only its own
// part (LoadFunctionConfig), beside Common, so a bad value meant for one function does not stop
// another; crawlq local, which runs all four, reads every part (LoadConfig). The database
// settings are read by Setup (envconfig.DB), the dispatch function's ECS launcher and the worker's
// GC settings and proxy credentials by their mains.
type Config struct {
	Common
	// API is the api function's part; zero in the other functions.
	API APIConfig
	// Dispatch is the dispatch function's part; zero in the other functions.
	Dispatch DispatchConfig
	// Worker is the worker function's part; zero in the other functions.
	Worker WorkerConfig
}

// Common is what every function reads: its log level, and where the run events it publishes and
// the run logs it keeps go (every function's Deps build the publisher).
type Common struct {
	// LogLevel is CRAWLQ_LOG_LEVEL: debug, info, warn or error. Default info.
	LogLevel string
	// EventBus is where run events go (CRAWLQ_EVENT_BUS): an EventBridge bus, "off", or
	// file:PATH. Default "default".
	EventBus string
	// MetricsNamespace is the CloudWatch namespace of the EMF metrics (CRAWLQ_METRICS_NAMESPACE).
	// Default "crawlq".
	MetricsNamespace string
	// MetricsPerSpider writes spider and monitor metrics per spider (CRAWLQ_METRICS_PER_SPIDER);
	// false: as totals (metrics.Writer.SpiderTotals). Default true.
	MetricsPerSpider bool
	// RunLogGroup keeps run logs in that CloudWatch Logs group (CRAWLQ_RUN_LOG_GROUP); empty: the
	// crawlq_run_log table.
	RunLogGroup string
}

// APIConfig is what only the api function reads.
type APIConfig struct {
	// DispatchFunction is the function the api pokes after a change (CRAWLQ_DISPATCH_FUNCTION,
	// default the worker's name, CRAWLQ_WORKER_FUNCTION, with -dispatch for -worker).
	DispatchFunction string
	// ScheduleGroup, APIFunctionARN and SchedulerRoleARN let the api keep cron schedules in
	// EventBridge Scheduler (CRAWLQ_SCHEDULE_GROUP, default "crawlq"; CRAWLQ_API_FUNCTION_ARN,
	// CRAWLQ_SCHEDULER_ROLE_ARN: both needed).
	ScheduleGroup, APIFunctionARN, SchedulerRoleARN string
	// Scrapyd is where the api function's Scrapyd URL gets its basic auth credentials.
	Scrapyd scrapyd.CredentialSource
	// ItemsBucket is where the worker stores items (CRAWLQ_ITEMS_BUCKET), which the Scrapyd URL
	// reads them from and keeps long answers in; empty: Postgres.
	ItemsBucket string
}

// DispatchConfig is what only the dispatch function reads.
type DispatchConfig struct {
	// WorkerFunction is the function the tick invokes (CRAWLQ_WORKER_FUNCTION). Default
	// "crawlq-worker".
	WorkerFunction string
	// WorkerMax is the most worker Lambdas the dispatch tick keeps busy (CRAWLQ_WORKER_MAX).
	// Default 10.
	WorkerMax int
	// LongMax is the most runner tasks working the long queue (CRAWLQ_ECS_MAX_TASKS). Default 2.
	LongMax int
	// Maintain is the dispatch tick's automatic maintenance; nil when CRAWLQ_MAINTAIN is off.
	Maintain *maintain.Config
	// CrawlRuntime is where the crawl queue's jobs run: CrawlOnLambda or CrawlOnFargate
	// (CRAWLQ_CRAWL_RUNTIME). Default CrawlOnLambda.
	CrawlRuntime string
	// CrawlFleet sizes the crawl queue's runner tasks when CrawlRuntime is CrawlOnFargate.
	CrawlFleet CrawlFleet
}

// WorkerConfig is what only the worker function reads here (WorkerOptions takes it).
type WorkerConfig struct {
	// ItemsBucket stores the worker's items in S3 under items/ (CRAWLQ_ITEMS_BUCKET); empty:
	// Postgres.
	ItemsBucket string
}

// CrawlFleet sizes the runner tasks that work the crawl queue on runtime fargate.
type CrawlFleet struct {
	// Max is the most tasks alive (CRAWLQ_ECS_CRAWL_MAX_TASKS). Default CRAWLQ_ECS_MAX_TASKS, else 10.
	Max int
	// Concurrency is the jobs each task works at once (CRAWLQ_ECS_CRAWL_CONCURRENCY). Default 20.
	Concurrency int
	// Burst is the most worker Lambdas while the tasks do not cover the backlog
	// (CRAWLQ_CRAWL_LAMBDA_BURST). Default 0.
	Burst int
}

// LoadConfig reads every function's Config from env (crawlq local runs all four); a bad value is
// an error naming its variable.
func LoadConfig(env envconfig.Env) (Config, error) {
	return loadConfig(env, envconfig.API, envconfig.Dispatch, envconfig.Worker)
}

// LoadFunctionConfig reads function fn's Config from env: Common and fn's own part (the metrics
// function has none). A bad value is an error naming its variable; a variable only another
// function reads is not read.
func LoadFunctionConfig(fn envconfig.Process, env envconfig.Env) (Config, error) {
	switch fn {
	case envconfig.API, envconfig.Dispatch, envconfig.Worker:
		return loadConfig(env, fn)
	case envconfig.Metrics:
		return loadConfig(env)
	}
	return Config{}, fmt.Errorf("lambdafn: %q is not one of the functions (api, worker, dispatch, metrics)", fn)
}

func loadConfig(env envconfig.Env, parts ...envconfig.Process) (Config, error) {
	var c Config
	var err error
	if c.Common, err = loadCommon(env); err != nil {
		return Config{}, err
	}
	for _, p := range parts {
		switch p {
		case envconfig.API:
			c.API, err = loadAPI(env)
		case envconfig.Dispatch:
			c.Dispatch, err = loadDispatch(env)
		case envconfig.Worker:
			c.Worker = WorkerConfig{ItemsBucket: env.String("CRAWLQ_ITEMS_BUCKET")}
		}
		if err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

func loadCommon(env envconfig.Env) (Common, error) {
	c := Common{
		LogLevel:         env.String("CRAWLQ_LOG_LEVEL"),
		EventBus:         env.StringOr("CRAWLQ_EVENT_BUS", events.DefaultBus),
		MetricsNamespace: env.String("CRAWLQ_METRICS_NAMESPACE"),
		RunLogGroup:      env.String("CRAWLQ_RUN_LOG_GROUP"),
	}
	if _, err := NewLogger(c.LogLevel, nil); err != nil {
		return Common{}, err
	}
	var err error
	if c.MetricsPerSpider, err = env.Bool("CRAWLQ_METRICS_PER_SPIDER", true); err != nil {
		return Common{}, err
	}
	return c, nil
}

// workerFunction is the worker function's name (CRAWLQ_WORKER_FUNCTION), which the dispatch
// function invokes and the api derives the dispatch function's default name from.
func workerFunction(env envconfig.Env) string {
	return env.StringOr("CRAWLQ_WORKER_FUNCTION", "crawlq-worker")
}

func loadAPI(env envconfig.Env) (APIConfig, error) {
	c := APIConfig{
		ScheduleGroup:    env.StringOr("CRAWLQ_SCHEDULE_GROUP", "crawlq"),
		APIFunctionARN:   env.String("CRAWLQ_API_FUNCTION_ARN"),
		SchedulerRoleARN: env.String("CRAWLQ_SCHEDULER_ROLE_ARN"),
		ItemsBucket:      env.String("CRAWLQ_ITEMS_BUCKET"),
	}
	def := "crawlq-dispatch"
	if w := workerFunction(env); strings.HasSuffix(w, "-worker") {
		def = strings.TrimSuffix(w, "-worker") + "-dispatch"
	}
	c.DispatchFunction = env.StringOr("CRAWLQ_DISPATCH_FUNCTION", def)
	var err error
	if c.Scrapyd, err = envconfig.Scrapyd(env); err != nil {
		return APIConfig{}, err
	}
	return c, nil
}

func loadDispatch(env envconfig.Env) (DispatchConfig, error) {
	c := DispatchConfig{WorkerFunction: workerFunction(env)}
	var err error
	if c.WorkerMax, err = env.Int("CRAWLQ_WORKER_MAX", 10); err != nil {
		return DispatchConfig{}, err
	}
	if c.LongMax, err = env.Int("CRAWLQ_ECS_MAX_TASKS", 2); err != nil {
		return DispatchConfig{}, err
	}
	if mc, on, err := envconfig.Maintain(env); err != nil {
		return DispatchConfig{}, err
	} else if on {
		c.Maintain = &mc
	}
	switch c.CrawlRuntime = env.StringOr("CRAWLQ_CRAWL_RUNTIME", CrawlOnLambda); c.CrawlRuntime {
	case CrawlOnLambda:
	case CrawlOnFargate:
		if c.CrawlFleet, err = loadCrawlFleet(env); err != nil {
			return DispatchConfig{}, err
		}
	default:
		return DispatchConfig{}, envconfig.Errorf("CRAWLQ_CRAWL_RUNTIME", "not %s or %s: %q", CrawlOnLambda, CrawlOnFargate, c.CrawlRuntime)
	}
	return c, nil
}

// loadCrawlFleet reads the crawl fleet's settings, which only runtime fargate uses.
func loadCrawlFleet(env envconfig.Env) (CrawlFleet, error) {
	var f CrawlFleet
	def, err := env.Int("CRAWLQ_ECS_MAX_TASKS", 10)
	if err != nil {
		return f, err
	}
	if f.Max, err = env.Int("CRAWLQ_ECS_CRAWL_MAX_TASKS", def); err != nil {
		return f, err
	}
	if f.Concurrency, err = env.Int("CRAWLQ_ECS_CRAWL_CONCURRENCY", 20); err != nil {
		return f, err
	}
	if f.Burst, err = env.Int("CRAWLQ_CRAWL_LAMBDA_BURST", 0); err != nil {
		return f, err
	}
	return f, nil
}
