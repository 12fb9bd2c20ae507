package lambdafn

import (
	"strings"

	"crawlq/internal/envconfig"
	"crawlq/internal/events"
	"crawlq/internal/maintain"
	"crawlq/internal/scrapyd"
)

// Config is what the functions' environment (the contract Terraform sets) says; LoadConfig is the
// one place in this package that reads it. The database settings are read by Setup
// (envconfig.DB), the dispatch function's ECS launcher by its main (envconfig.ECSLauncher).
type Config struct {
	// LogLevel is CRAWLQ_LOG_LEVEL: debug, info, warn or error. Default info.
	LogLevel string
	// Functions are the names the functions call each other by.
	Functions FunctionNames
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
	// ScheduleGroup, APIFunctionARN and SchedulerRoleARN let the api keep cron schedules in
	// EventBridge Scheduler (CRAWLQ_SCHEDULE_GROUP, default "crawlq"; CRAWLQ_API_FUNCTION_ARN,
	// CRAWLQ_SCHEDULER_ROLE_ARN: both needed).
	ScheduleGroup, APIFunctionARN, SchedulerRoleARN string
	// Scrapyd is where the api function's Scrapyd URL gets its basic auth credentials.
	Scrapyd scrapyd.CredentialSource
	// ItemsBucket stores the worker's items in S3 under items/ (CRAWLQ_ITEMS_BUCKET); empty:
	// Postgres.
	ItemsBucket string
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

// FunctionNames are the names the functions call each other by.
type FunctionNames struct {
	Worker   string // CRAWLQ_WORKER_FUNCTION, default "crawlq-worker"
	Dispatch string // CRAWLQ_DISPATCH_FUNCTION, default the worker's name with -dispatch for -worker
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

// LoadConfig reads the functions' Config from env; a bad value is an error naming its variable.
func LoadConfig(env envconfig.Env) (Config, error) {
	c := Config{
		LogLevel:         env.String("CRAWLQ_LOG_LEVEL"),
		EventBus:         env.StringOr("CRAWLQ_EVENT_BUS", events.DefaultBus),
		MetricsNamespace: env.String("CRAWLQ_METRICS_NAMESPACE"),
		RunLogGroup:      env.String("CRAWLQ_RUN_LOG_GROUP"),
		ScheduleGroup:    env.StringOr("CRAWLQ_SCHEDULE_GROUP", "crawlq"),
		APIFunctionARN:   env.String("CRAWLQ_API_FUNCTION_ARN"),
		SchedulerRoleARN: env.String("CRAWLQ_SCHEDULER_ROLE_ARN"),
		ItemsBucket:      env.String("CRAWLQ_ITEMS_BUCKET"),
	}
	if _, err := NewLogger(c.LogLevel, nil); err != nil {
		return Config{}, err
	}
	c.Functions.Worker = env.StringOr("CRAWLQ_WORKER_FUNCTION", "crawlq-worker")
	def := "crawlq-dispatch"
	if strings.HasSuffix(c.Functions.Worker, "-worker") {
		def = strings.TrimSuffix(c.Functions.Worker, "-worker") + "-dispatch"
	}
	c.Functions.Dispatch = env.StringOr("CRAWLQ_DISPATCH_FUNCTION", def)
	var err error
	if c.MetricsPerSpider, err = env.Bool("CRAWLQ_METRICS_PER_SPIDER", true); err != nil {
		return Config{}, err
	}
	if c.Scrapyd, err = envconfig.Scrapyd(env); err != nil {
		return Config{}, err
	}
	if c.WorkerMax, err = env.Int("CRAWLQ_WORKER_MAX", 10); err != nil {
		return Config{}, err
	}
	if c.LongMax, err = env.Int("CRAWLQ_ECS_MAX_TASKS", 2); err != nil {
		return Config{}, err
	}
	if mc, on, err := envconfig.Maintain(env); err != nil {
		return Config{}, err
	} else if on {
		c.Maintain = &mc
	}
	switch c.CrawlRuntime = env.StringOr("CRAWLQ_CRAWL_RUNTIME", CrawlOnLambda); c.CrawlRuntime {
	case CrawlOnLambda:
	case CrawlOnFargate:
		if c.CrawlFleet, err = loadCrawlFleet(env); err != nil {
			return Config{}, err
		}
	default:
		return Config{}, envconfig.Errorf("CRAWLQ_CRAWL_RUNTIME", "not %s or %s: %q", CrawlOnLambda, CrawlOnFargate, c.CrawlRuntime)
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
