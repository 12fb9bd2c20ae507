package envconfig

//go:generate go run ./gendoc -o ../../docs/configuration.md

// Process names a kind of crawlq process that reads the environment.
type Process string

// The processes: the five Lambda functions, the ECS runner task (`crawlq runner`) and the other
// crawlq commands (`crawlq local` runs the Lambda handlers in one process and reads what they
// read besides).
const (
	API      Process = "api"
	Worker   Process = "worker"
	Dispatch Process = "dispatch"
	Metrics  Process = "metrics"
	Migrate  Process = "migrate"
	Runner   Process = "runner"
	CLI      Process = "crawlq"
)

// Processes lists them in the documentation's order.
var Processes = []Process{API, Worker, Dispatch, Metrics, Migrate, Runner, CLI}

// Var is one environment variable crawlq reads.
type Var struct {
	Name    string
	Default string // as documented; "" for none
	Meaning string
	// Group heads the variable's section of docs/configuration.md.
	Group string
	// Read lists the processes that read it.
	Read []Process
}

var (
	lambdas   = []Process{API, Worker, Dispatch, Metrics}
	databased = []Process{API, Worker, Dispatch, Metrics, Migrate, Runner, CLI}
)

// also returns base with more after it, never sharing base's array.
func also(base []Process, more ...Process) []Process {
	return append(append([]Process(nil), base...), more...)
}

// Vars is every variable crawlq reads. TestVarsMatchTheCode fails when the code reads a
// variable missing here, or this lists one the code no longer reads; docs/configuration.md is
// generated from it (go generate ./internal/envconfig).
var Vars = []Var{
	// Database.
	{"DATABASE_URL", "", "PostgreSQL URL (postgres://...); when set, the CRAWLQ_DB_* addressing is ignored. The CLI's --database-url wins over it.", "Database", databased},
	{"CRAWLQ_DB_HOST", "", "RDS Proxy (or RDS) endpoint, reached with TLS; used when DATABASE_URL is unset.", "Database", databased},
	{"CRAWLQ_DB_PORT", "5432", "Port of CRAWLQ_DB_HOST (else the secret's).", "Database", databased},
	{"CRAWLQ_DB_NAME", "crawlq", "Database name (else the secret's dbname).", "Database", databased},
	{"CRAWLQ_DB_USER", "", "Database user (else the secret's username); required with CRAWLQ_DB_IAM_AUTH. The migrate function's is the master user.", "Database", databased},
	{"CRAWLQ_DB_IAM_AUTH", "false", "true: authenticate with an IAM token built for every new connection.", "Database", databased},
	{"CRAWLQ_DB_SECRET_ARN", "", "Secrets Manager secret with username and password (and optionally port, dbname), read again for every new connection.", "Database", databased},
	{"CRAWLQ_DB_EXEC_MODE", "exec", "pgx query exec mode: exec, simple, cache_describe or cache_statement (cache_statement pins RDS Proxy connections).", "Database", databased},
	{"CRAWLQ_DB_TLS", "true", "false turns TLS off for CRAWLQ_DB_HOST (a local server without TLS); true verifies the server's certificate and name.", "Database", databased},
	{"CRAWLQ_DB_CA_URL", "", "https URL of a PEM bundle of the roots TLS trusts instead of the system's, fetched when the pool is opened (the stack without RDS Proxy: the region's RDS bundle from truststore.pki.rds.amazonaws.com).", "Database", databased},
	{"CRAWLQ_DB_MAX_CONNS", "", "Most connections the process's pool opens; unset: the process's own default (crawlq's commands and the runner 20, crawlq local 30, api 4, worker 12, dispatch 4, metrics 2, migrate 2). The stack without RDS Proxy sets the runners' (runner_db_connections).", "Database", databased},
	{"CRAWLQ_DB_CA_FILE", "", "PEM bundle of the roots TLS trusts instead of the system's (a direct RDS connection needs the RDS bundle).", "Database", databased},
	{"CRAWLQ_DB_APP_USER", "crawlq_app", "Application role the migrate function gives a login.", "Database", []Process{Migrate}},
	{"CRAWLQ_DB_APP_IAM", "false", "true: grant the application role rds_iam and LOGIN, so IAM tokens are its only login (RDS without the proxy); it excludes CRAWLQ_DB_APP_SECRET_ARN.", "Database", []Process{Migrate}},
	{"CRAWLQ_DB_APP_SECRET_ARN", "", "Secret holding the application role's password; unset: the role's login is left alone.", "Database", []Process{Migrate}},

	// Functions and processes.
	{"CRAWLQ_LOG_LEVEL", "info", "Log level of the functions and crawlq local: debug, info, warn or error.", "Functions", also(lambdas, CLI)},
	{"CRAWLQ_WORKER_FUNCTION", "crawlq-worker", "Name of the worker function the dispatch tick invokes.", "Functions", []Process{API, Dispatch, CLI}},
	{"CRAWLQ_DISPATCH_FUNCTION", "the worker's name with -dispatch for -worker", "Name of the dispatch function the api (and crawlq's wake after a schedule, cancel or redrive) pokes.", "Functions", []Process{API, CLI}},
	{"CRAWLQ_ITEMS_BUCKET", "", "S3 bucket the worker and the runner store items in (under items/), which the api's Scrapyd URL reads them from and keeps answers over 6 MB in, and the runner keeps failed rendered pages' screenshots and HTML in (under artifacts/); unset: Postgres.", "Functions", []Process{API, Worker, Runner, CLI}},
	{"CRAWLQ_METRICS_NAMESPACE", "crawlq", "CloudWatch namespace of the EMF metrics (queue, spider and monitor metrics).", "Functions", also(lambdas, Runner, CLI)},
	{"CRAWLQ_METRICS_PER_SPIDER", "true", "Write spider and monitor metrics per spider (dimension Spider: 13 CloudWatch metrics a spider); false: as totals over every spider, each EMF line still naming its spider (Terraform's metrics_per_spider, default false).", "Functions", also(lambdas, Runner, CLI)},
	{"CRAWLQ_RUN_LOG_GROUP", "", "CloudWatch Logs group that keeps run logs (a stream per run); unset: the crawlq_run_log table.", "Functions", also(lambdas, Runner, CLI)},
	{"CRAWLQ_EVENT_BUS", "default (functions); for crawlq local, worker and runner: default when AWS_ENDPOINT_URL names an emulator, else off", "Where run events go: an EventBridge bus, off, or file:PATH (JSON Lines). The --event-bus flag wins.", "Functions", also(lambdas, Runner, CLI)},

	// api.
	{"CRAWLQ_SCHEDULE_GROUP", "crawlq", "EventBridge Scheduler group the api keeps cron schedules in (and crawlq schedules reads).", "API", []Process{API, CLI}},
	{"CRAWLQ_API_FUNCTION_ARN", "", "ARN of the api function, the target of cron schedules; with CRAWLQ_SCHEDULER_ROLE_ARN it turns EventBridge Scheduler on.", "API", []Process{API, CLI}},
	{"CRAWLQ_SCHEDULER_ROLE_ARN", "", "Role EventBridge Scheduler invokes the api function with.", "API", []Process{API, CLI}},
	{"CRAWLQ_SCRAPYD_SECRET_ARN", "", "Secret holding the Scrapyd API's basic auth {\"username\",\"password\"}; wins over the two below. None of the three: the api function's URL answers 503.", "API", []Process{API, CLI}},
	{"CRAWLQ_SCRAPYD_USERNAME", "", "Scrapyd API basic auth user (with CRAWLQ_SCRAPYD_PASSWORD).", "API", []Process{API, CLI}},
	{"CRAWLQ_SCRAPYD_PASSWORD", "", "Scrapyd API basic auth password (with CRAWLQ_SCRAPYD_USERNAME).", "API", []Process{API, CLI}},

	// dispatch.
	{"CRAWLQ_WORKER_MAX", "10", "Most worker Lambdas the dispatch tick keeps busy.", "Dispatch", []Process{Dispatch, CLI}},
	{"CRAWLQ_ECS_MAX_TASKS", "2 for the long queue's fleet; the launcher's cap and the crawl fleet's default 10", "Most runner tasks alive at once.", "Dispatch", []Process{Dispatch, CLI}},
	{"CRAWLQ_CRAWL_RUNTIME", "lambda", "Where the crawl queue's jobs run: lambda (worker functions) or fargate (runner tasks).", "Dispatch", []Process{Dispatch, CLI}},
	{"CRAWLQ_ECS_CRAWL_MAX_TASKS", "CRAWLQ_ECS_MAX_TASKS, else 10", "With runtime fargate: most crawl runner tasks alive.", "Dispatch", []Process{Dispatch, CLI}},
	{"CRAWLQ_ECS_CRAWL_CONCURRENCY", "20", "With runtime fargate: jobs each crawl runner task works at once.", "Dispatch", []Process{Dispatch, CLI}},
	{"CRAWLQ_CRAWL_LAMBDA_BURST", "0", "With runtime fargate: most worker Lambdas while the crawl tasks do not cover the backlog.", "Dispatch", []Process{Dispatch, CLI}},
	{"CRAWLQ_ECS_CLUSTER", "", "ECS cluster runner tasks start in (required for ECS).", "Dispatch", []Process{Dispatch}},
	{"CRAWLQ_ECS_TASK_DEFINITION", "", "Runner task definition, family[:revision] or ARN (required for ECS).", "Dispatch", []Process{Dispatch}},
	{"CRAWLQ_ECS_CONTAINER", "runner", "Runner container's name in the task definition.", "Dispatch", []Process{Dispatch}},
	{"CRAWLQ_ECS_SUBNETS", "", "Comma-separated subnets of the tasks (at least one required for ECS).", "Dispatch", []Process{Dispatch}},
	{"CRAWLQ_ECS_SECURITY_GROUPS", "the VPC's default group", "Comma-separated security groups of the tasks.", "Dispatch", []Process{Dispatch}},
	{"CRAWLQ_ECS_ASSIGN_PUBLIC_IP", "false", "true gives tasks a public IP (public subnets without a NAT gateway).", "Dispatch", []Process{Dispatch}},
	{"CRAWLQ_ECS_CAPACITY_PROVIDER", "FARGATE_SPOT", "Capacity provider tasks are started on first.", "Dispatch", []Process{Dispatch}},
	{"CRAWLQ_ECS_FALLBACK_PROVIDER", "FARGATE", "Capacity provider for what the first had no capacity for; none disables it.", "Dispatch", []Process{Dispatch}},
	{"CRAWLQ_ECS_QUEUE", "long", "Queue the launched runners work (passed to them as CRAWLQ_QUEUE).", "Dispatch", []Process{Dispatch}},
	{"CRAWLQ_ECS_RUNNER_CONCURRENCY", "the runner's", "Passed to launched runners as CRAWLQ_CONCURRENCY.", "Dispatch", []Process{Dispatch}},
	{"CRAWLQ_ECS_RUNNER_MAX_JOBS", "the runner's", "Passed to launched runners as CRAWLQ_MAX_JOBS.", "Dispatch", []Process{Dispatch}},
	{"CRAWLQ_ECS_RUNNER_MAX_MEMORY_MIB", "the runner's", "Passed to launched runners as CRAWLQ_MAX_MEMORY_MIB.", "Dispatch", []Process{Dispatch}},

	// Maintenance.
	{"CRAWLQ_MAINTAIN", "on", "off turns automatic maintenance off (the deletes that keep the database's size bounded).", "Maintenance", []Process{Dispatch, Runner, CLI}},
	{"CRAWLQ_RETAIN_SUCCEEDED", "24h", "How long succeeded jobs are kept after they finished (Go duration).", "Maintenance", []Process{Dispatch, Runner, CLI}},
	{"CRAWLQ_RETAIN_CANCELLED", "24h", "How long cancelled jobs are kept after they finished.", "Maintenance", []Process{Dispatch, Runner, CLI}},
	{"CRAWLQ_RETAIN_DEAD", "168h", "How long dead jobs are kept after they died, for crawlq redrive.", "Maintenance", []Process{Dispatch, Runner, CLI}},
	{"CRAWLQ_RETAIN_RUN_DATA", "24h", "How long a finished run's once keys, robots.txt copies and stat rows are kept (runs with no dead job).", "Maintenance", []Process{Dispatch, Runner, CLI}},
	{"CRAWLQ_RETAIN_IDLE_HOSTS", "24h", "How long a host's politeness row is kept after its last request (at least 1h).", "Maintenance", []Process{Dispatch, Runner, CLI}},
	{"CRAWLQ_MAINTAIN_INTERVAL", "1m", "Least time between two maintenance passes, across all processes.", "Maintenance", []Process{Dispatch, Runner, CLI}},
	{"CRAWLQ_MAINTAIN_BATCH", "2000", "Most rows each maintenance statement deletes.", "Maintenance", []Process{Dispatch, Runner, CLI}},
	{"CRAWLQ_MAINTAIN_BUDGET", "20s", "Bound of one maintenance pass; what is left waits for the next.", "Maintenance", []Process{Dispatch, Runner, CLI}},

	// Runner.
	{"CRAWLQ_QUEUE", "long", "Queue crawlq runner works (its --queue flag wins).", "Runner", []Process{Runner}},
	{"CRAWLQ_CONCURRENCY", "6", "Jobs crawlq runner works at once (--concurrency wins).", "Runner", []Process{Runner}},
	{"CRAWLQ_MAX_JOBS", "0 (no limit)", "crawlq runner exits after this many jobs, for a fresh task (--max-jobs wins).", "Runner", []Process{Runner}},
	{"CRAWLQ_MAX_MEMORY_MIB", "0 (no limit)", "crawlq runner exits when its resident memory passes this (--max-memory-mib wins).", "Runner", []Process{Runner}},
	{"CRAWLQ_STOP_GRACE", "100s", "After SIGTERM, how long crawlq runner's running jobs may finish (--grace wins).", "Runner", []Process{Runner}},
	{"CRAWLQ_SPIDER_DIR", "", "Directory of extra spider specs crawlq runner loads (--spiders wins).", "Runner", []Process{Runner}},

	{"CRAWLQ_PROXY_*", "", "Proxy credentials a spider spec names as ${CRAWLQ_PROXY_...} in its proxies (only this prefix is filled in, so a spec cannot send other variables to a proxy).", "Runner", []Process{Worker, Runner, CLI}},

	// CLI.
	{"CRAWLQ_API", "", "Api function the remote-capable commands go through (as --api FUNCTION); unset: the database.", "CLI", []Process{CLI}},
	{"TF_CLI_CONFIG_FILE", "scripts/tfrc.sh's provider mirror, when the repository has one", "Terraform CLI configuration crawlq deploy runs terraform with.", "CLI", []Process{CLI}},

	// AWS and Go runtime.
	{"AWS_ENDPOINT_URL", "", "Endpoint of an AWS emulator (moto, LocalStack) for every AWS client; S3 then uses path-style addressing.", "AWS and Go runtime", databased},
	{"AWS_REGION", "us-east-1 when neither it nor AWS_DEFAULT_REGION is set", "AWS region.", "AWS and Go runtime", databased},
	{"AWS_DEFAULT_REGION", "", "AWS region, when AWS_REGION is unset.", "AWS and Go runtime", databased},
	{"AWS_ACCESS_KEY_ID", "", "With AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN): the credentials crawlq --api signs with (one without the other is refused), else the SDK's chain.", "AWS and Go runtime", []Process{CLI}},
	{"AWS_SECRET_ACCESS_KEY", "", "See AWS_ACCESS_KEY_ID.", "AWS and Go runtime", []Process{CLI}},
	{"AWS_SESSION_TOKEN", "", "See AWS_ACCESS_KEY_ID.", "AWS and Go runtime", []Process{CLI}},
	{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "set by Lambda", "A function's memory; the Go heap's soft limit is 80% of it (else of the cgroup's limit).", "AWS and Go runtime", []Process{Worker, CLI}},
	{"GOGC", "400 (crawlq's, not Go's 100)", "Go's GC percent; when set, it wins over crawlq's.", "AWS and Go runtime", []Process{Worker, Runner, CLI}},
	{"GOMEMLIMIT", "80% of the container's memory", "Go's soft memory limit; when set, it wins over crawlq's.", "AWS and Go runtime", []Process{Worker, Runner, CLI}},
}
