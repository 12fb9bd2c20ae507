// Package lambdafn owns the handlers of crawlq's four Lambda functions (api, worker, dispatch,
// metrics) and what they share per execution environment: one database pool, the AWS config and
// the spider registry, built once by Setup from the environment contract Terraform sets. The
// functions' mains only call Setup and lambda.Start; `crawlq local` calls the same handlers.
package lambdafn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/api"
	"crawlq/internal/awsx"
	"crawlq/internal/db"
	"crawlq/internal/dispatch"
	"crawlq/internal/ecsrun"
	"crawlq/internal/events"
	"crawlq/internal/fetch"
	"crawlq/internal/items"
	"crawlq/internal/maintain"
	"crawlq/internal/metrics"
	"crawlq/internal/migrate"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
)

// Deps are what every function of one execution environment shares.
type Deps struct {
	Pool    *pgxpool.Pool
	AWS     aws.Config
	Spiders *spider.Registry
	// Control is a node that is never run: its queue client and crawler serve the api, dispatch
	// and metrics (scheduling, listing, upkeep) without working any queue.
	Control *node.Node
	// Publisher publishes run events, to the bus Events reads from the environment: the api and
	// worker functions publish the events of the changes they make before they return (see
	// PublishRunEvents), the dispatch tick what is left.
	Publisher *events.Publisher
	Getenv    func(string) string
	Logger    *slog.Logger
}

// Setup builds Deps from the environment (see db.FromEnv for the database variables;
// CRAWLQ_LOG_LEVEL sets the log level, default info). maxConns bounds the pool (0: 10).
func Setup(ctx context.Context, getenv func(string) string, maxConns int32) (*Deps, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	logger, err := NewLogger(getenv("CRAWLQ_LOG_LEVEL"), os.Stderr)
	if err != nil {
		return nil, err
	}
	awsCfg, err := awsx.Load(ctx)
	if err != nil {
		return nil, err
	}
	dc, err := db.FromEnv(ctx, getenv, awsCfg)
	if err != nil {
		return nil, err
	}
	dc.MaxConns = maxConns
	pool, err := db.Open(ctx, dc)
	if err != nil {
		return nil, err
	}
	// On AWS the migrate function brings the schema up to date before the other functions run
	// (they connect as crawlq_app, which may not change the schema), so here this is one query
	// that finds nothing to do. Locally (`crawlq local`, tests, a superuser URL) it migrates;
	// safe when several start at once (migrations take a transaction-scoped lock).
	if _, err := migrate.Up(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("schema not up to date (on AWS, invoke the <name>-migrate function, or redeploy): %w", err)
	}
	d, err := NewDeps(pool, awsCfg, nil, getenv, logger)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return d, nil
}

// NewDeps assembles Deps from parts (tests and `crawlq local`). A nil registry loads the
// embedded spiders.
func NewDeps(pool *pgxpool.Pool, awsCfg aws.Config, reg *spider.Registry, getenv func(string) string, logger *slog.Logger) (*Deps, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if logger == nil {
		logger = slog.Default()
	}
	if reg == nil {
		var err error
		if reg, err = node.LoadSpiders(""); err != nil {
			return nil, fmt.Errorf("load spiders: %w", err)
		}
	}
	ctl, err := node.New(node.Config{Pool: pool, Spiders: reg, Upkeep: -1, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("assemble node: %w", err)
	}
	d := &Deps{Pool: pool, AWS: awsCfg, Spiders: reg, Control: ctl, Getenv: getenv, Logger: logger}
	// Monitor metrics go to stdout, which Lambda sends to CloudWatch Logs as EMF.
	if d.Publisher, err = d.Events(os.Stdout); err != nil {
		ctl.Pipeline.Close(context.Background())
		return nil, fmt.Errorf("run events: %w", err)
	}
	return d, nil
}

// Close releases the control node's pipeline and the pool.
func (d *Deps) Close(ctx context.Context) error {
	err := d.Control.Pipeline.Close(ctx)
	d.Pool.Close()
	return err
}

// NewLogger returns a JSON logger at level ("debug", "info", "warn", "error"; empty: info).
func NewLogger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if level != "" {
		if err := l.UnmarshalText([]byte(level)); err != nil {
			return nil, fmt.Errorf("CRAWLQ_LOG_LEVEL %q: want debug, info, warn or error", level)
		}
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func envInt(getenv func(string) string, name string, def int) (int, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q: want a non-negative integer", name, v)
	}
	return n, nil
}

func envOr(getenv func(string) string, name, def string) string {
	if v := strings.TrimSpace(getenv(name)); v != "" {
		return v
	}
	return def
}

// FunctionNames are the names the functions call each other by.
type FunctionNames struct {
	Worker   string // CRAWLQ_WORKER_FUNCTION, default "crawlq-worker"
	Dispatch string // CRAWLQ_DISPATCH_FUNCTION, default the worker's name with -dispatch for -worker
}

// Names reads FunctionNames from the environment.
func (d *Deps) Names() FunctionNames {
	w := envOr(d.Getenv, "CRAWLQ_WORKER_FUNCTION", "crawlq-worker")
	def := "crawlq-dispatch"
	if strings.HasSuffix(w, "-worker") {
		def = strings.TrimSuffix(w, "-worker") + "-dispatch"
	}
	return FunctionNames{Worker: w, Dispatch: envOr(d.Getenv, "CRAWLQ_DISPATCH_FUNCTION", def)}
}

// APIConfig returns the api configuration the environment describes: schedules through
// EventBridge Scheduler when CRAWLQ_API_FUNCTION_ARN and CRAWLQ_SCHEDULER_ROLE_ARN are set,
// and a poke of the dispatch function after each schedule through invoker (nil: no poke).
func (d *Deps) APIConfig(invoker dispatch.Invoker) api.Config {
	c := api.Config{Crawler: d.Control.Crawler, Queue: d.Control.Queue, Spiders: d.Spiders, Logger: d.Logger,
		ScheduleGroup: envOr(d.Getenv, "CRAWLQ_SCHEDULE_GROUP", "crawlq"),
		TargetARN:     d.Getenv("CRAWLQ_API_FUNCTION_ARN"), RoleARN: d.Getenv("CRAWLQ_SCHEDULER_ROLE_ARN")}
	if c.TargetARN != "" && c.RoleARN != "" {
		c.Scheduler = scheduler.NewFromConfig(d.AWS)
	}
	c.OnRunChange = d.PublishRunEvents
	if invoker != nil {
		fn := d.Names().Dispatch
		c.Poke = func(ctx context.Context, runID int64) error {
			payload, err := json.Marshal(dispatchEvent{Source: dispatch.PokeSource, Runs: []int64{runID}})
			if err != nil {
				return err
			}
			_, err = invoker.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(fn),
				InvocationType: lambdatypes.InvocationTypeEvent, Payload: payload})
			return err
		}
	}
	return c
}

// API returns the api handler: any JSON payload in, a Scrapyd-shaped response out. It never
// returns an error, so callers always get {"status":...}.
func API(a *api.API) func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
	return func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
		return a.HandleJSON(ctx, payload), nil
	}
}

// DispatchConfig returns the dispatcher configuration the environment describes
// (CRAWLQ_WORKER_MAX, CRAWLQ_ECS_MAX_TASKS, the maintenance settings of maintain.FromEnv, and
// CRAWLQ_EVENT_BUS for run events, see Events);
// invoker starts workers, launcher runner tasks.
func (d *Deps) DispatchConfig(invoker dispatch.Invoker, launcher dispatch.TaskLauncher) (dispatch.Config, error) {
	wmax, err := envInt(d.Getenv, "CRAWLQ_WORKER_MAX", 10)
	if err != nil {
		return dispatch.Config{}, err
	}
	lmax, err := envInt(d.Getenv, "CRAWLQ_ECS_MAX_TASKS", 2)
	if err != nil {
		return dispatch.Config{}, err
	}
	var mt *maintain.Service
	if mc, on, err := maintain.FromEnv(d.Getenv); err != nil {
		return dispatch.Config{}, err
	} else if on {
		mc.Logger = d.Logger
		if mt, err = maintain.New(d.Control.Queue, d.Control.Crawler, mc); err != nil {
			return dispatch.Config{}, err
		}
	}
	return dispatch.Config{Queue: d.Control.Queue, Crawler: d.Control.Crawler, Invoker: invoker,
		WorkerFunction: d.Names().Worker, WorkerMax: wmax, Launcher: launcher, LongMax: lmax, Maintain: mt, Logger: d.Logger,
		Events: drainEvents(d.Publisher), PublishRuns: publishRuns(d.Publisher)}, nil
}

// dispatchEvent is the dispatch function's payload: the minute schedule's {"source":"schedule"},
// a deploy's {"source":"deploy"}, or the api's poke, which names the runs it changed.
type dispatchEvent struct {
	Source string  `json:"source"`
	Runs   []int64 `json:"runs,omitempty"`
}

// Dispatch returns the dispatch handler: the api's poke runs Dispatcher.Poke for its runs,
// anything else (a payload that is not JSON too) a full tick.
func Dispatch(dp *dispatch.Dispatcher) func(ctx context.Context, payload json.RawMessage) (dispatch.Result, error) {
	return func(ctx context.Context, payload json.RawMessage) (dispatch.Result, error) {
		var ev dispatchEvent
		if json.Unmarshal(payload, &ev) == nil && ev.Source == dispatch.PokeSource {
			return dp.Poke(ctx, ev.Runs)
		}
		return dp.Tick(ctx)
	}
}

// WorkerOptions tune the worker handler. The zero value suits a Lambda of a few minutes.
type WorkerOptions struct {
	// Margin is kept free before the invocation's deadline: the worker stops claiming at
	// deadline-Margin, and running jobs get StopGrace of it to finish. Default 20s.
	Margin time.Duration
	// StopGrace is how long running jobs may finish once claiming stops, before they are
	// cancelled and released. Default Margin/2.
	StopGrace time.Duration
	// IdleExit ends the invocation after this long with nothing claimed and nothing running,
	// so an idle worker does not bill until its deadline. Default 10s.
	IdleExit time.Duration
	// Worker is the template queue worker config (Queue, Kind and StopGrace are set here).
	Worker queue.WorkerConfig
	// ItemsBucket, when set, stores items in S3 under items/ (CRAWLQ_ITEMS_BUCKET); else Postgres.
	ItemsBucket string
	// Fetch is the fetcher's base config. The zero value (the Lambda's) refuses every address
	// that is not public, the function's own runtime API on 127.0.0.1:9001 among them; crawlq
	// local sets AllowLoopback with --allow-loopback, to crawl a site on this machine.
	Fetch fetch.Config
	// Configure, when set, adjusts each invocation's node before it runs (extra job kinds).
	Configure func(*node.Node)
}

// WorkerResult says what one worker invocation did.
type WorkerResult struct {
	Queue     string `json:"queue"`
	Stopped   string `json:"stopped"` // "deadline", "idle" or "cancelled"
	Claimed   int64  `json:"claimed"`
	Succeeded int64  `json:"succeeded"`
	Failed    int64  `json:"failed"`
	Released  int64  `json:"released"`
	Lost      int64  `json:"lost"`
}

var errNoDeadline = errors.New("worker: the invocation has no deadline")

// Worker returns the worker handler: it works event.Queue (default "crawl") until the deadline
// minus the margin, or until idle; then stops claiming, lets running jobs finish within
// StopGrace, releases what it has not finished, drains the item pipeline and returns, leaving
// nothing leased.
func (d *Deps) Worker(opt WorkerOptions) func(ctx context.Context, ev dispatch.WorkerEvent) (WorkerResult, error) {
	if opt.Margin <= 0 {
		opt.Margin = 20 * time.Second
	}
	if opt.StopGrace <= 0 {
		opt.StopGrace = opt.Margin / 2
	}
	if opt.IdleExit <= 0 {
		opt.IdleExit = 10 * time.Second
	}
	return func(ctx context.Context, ev dispatch.WorkerEvent) (WorkerResult, error) {
		if ev.Queue == "" {
			ev.Queue = spider.DefaultQueue
		}
		res := WorkerResult{Queue: ev.Queue}
		if err := queue.ValidateQueue(ev.Queue); err != nil {
			return res, fmt.Errorf("worker event: %w", err)
		}
		deadline, ok := ctx.Deadline()
		if !ok {
			return res, errNoDeadline
		}
		wc := opt.Worker
		if wc.Kind == "" {
			wc.Kind = dispatch.LambdaKind
		}
		wc.StopGrace = opt.StopGrace
		var sink items.Sink
		if opt.ItemsBucket != "" {
			sink = items.NewS3Sink(s3.NewFromConfig(d.AWS, awsx.S3Options()...), opt.ItemsBucket, "items/")
		}
		// The runs this invocation starts and finishes have their events published at once, and
		// the last ones before it returns, within a quarter of the margin (what the margin leaves
		// after StopGrace and the pipeline's drain); the dispatch tick publishes the rest.
		evs, err := events.NewLoop(events.LoopConfig{Publisher: d.Publisher, Timeout: opt.Margin / 4, Logger: d.Logger})
		if err != nil {
			return res, fmt.Errorf("assemble worker: %w", err)
		}
		n, err := node.New(node.Config{Pool: d.Pool, Spiders: d.Spiders, Queues: []string{ev.Queue}, Worker: wc,
			Upkeep: -1, Sink: sink, Events: evs, Fetch: opt.Fetch, Logger: d.Logger, RunLog: d.RunLog()})
		if err != nil {
			return res, fmt.Errorf("assemble worker: %w", err)
		}
		if opt.Configure != nil {
			opt.Configure(n)
		}
		// Claiming stops at deadline-Margin; the node's own shutdown (grace, release, pipeline
		// drain) then runs on a context that is not yet cancelled.
		workCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline.Add(-opt.Margin))
		defer cancel()
		idle := make(chan bool, 1)
		go func() {
			wentIdle := false
			defer func() { idle <- wentIdle }()
			t := time.NewTicker(min(opt.IdleExit/4, time.Second))
			defer t.Stop()
			var last int64 = -1
			idleSince := time.Now()
			for {
				select {
				case <-workCtx.Done():
					return
				case <-ctx.Done():
					cancel()
					return
				case <-t.C:
				}
				s := n.Stats()
				inFlight := s.Claimed - s.Succeeded - s.Failed - s.Snoozed - s.Released - s.Lost
				if s.Claimed != last || inFlight > 0 {
					last, idleSince = s.Claimed, time.Now()
					continue
				}
				if time.Since(idleSince) >= opt.IdleExit {
					wentIdle = true
					cancel()
					return
				}
			}
		}()
		runErr := n.Run(workCtx)
		cancel()
		switch {
		case <-idle:
			res.Stopped = "idle"
		case ctx.Err() != nil:
			res.Stopped = "cancelled"
		default:
			res.Stopped = "deadline"
		}
		s := n.Stats()
		res.Claimed, res.Succeeded, res.Failed, res.Released, res.Lost = s.Claimed, s.Succeeded, s.Failed, s.Released, s.Lost
		if runErr != nil {
			return res, fmt.Errorf("worker: %w", runErr)
		}
		return res, nil
	}
}

// Metrics returns the metrics handler: each call writes one EMF line per queue and per spider
// to w (the function's stdout). Counters that are totals in Postgres (succeeded, dead) are
// reported as the change since this execution environment's previous call (zero on its first).
func (d *Deps) Metrics(w io.Writer, namespace string) func(ctx context.Context, payload json.RawMessage) (MetricsResult, error) {
	mw := metrics.Writer{Namespace: namespace, W: w}
	prevSucceeded, prevDead := map[string]int64{}, map[string]int64{}
	var last time.Time
	var mu sync.Mutex
	return func(ctx context.Context, _ json.RawMessage) (MetricsResult, error) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		since := last
		if since.IsZero() {
			since = now.Add(-time.Minute)
		}
		qs, err := d.Control.Queue.Stats(ctx)
		if err != nil {
			return MetricsResult{}, fmt.Errorf("queue stats: %w", err)
		}
		ss, err := d.Control.Crawler.SpiderStats(ctx, since)
		if err != nil {
			return MetricsResult{}, fmt.Errorf("spider stats: %w", err)
		}
		var mq []metrics.QueueStat
		for _, q := range qs {
			st := metrics.QueueStat{Queue: q.Queue, Available: q.Available, PastDue: q.PastDue, Running: q.Running,
				Dead: q.Dead, OldestPastDueAge: q.OldestPastDue}
			if p, ok := prevSucceeded[q.Queue]; ok {
				st.Succeeded = max(q.Succeeded-p, 0)
				st.Failed = max(q.Dead-prevDead[q.Queue], 0)
			}
			mq = append(mq, st)
		}
		var ms []metrics.SpiderStat
		for _, s := range ss {
			ms = append(ms, metrics.SpiderStat{Spider: s.Spider, Pages: s.Pages, Items: s.Items, Errors: s.Errors,
				RunsFinished: s.RunsSucceeded, RunsFailed: s.RunsFailed, RunsIncomplete: s.RunsIncomplete, DeadPages: s.DeadPages})
		}
		if err := mw.Write(now, mq, ms); err != nil {
			return MetricsResult{}, fmt.Errorf("write metrics: %w", err)
		}
		for _, q := range qs {
			prevSucceeded[q.Queue], prevDead[q.Queue] = q.Succeeded, q.Dead
		}
		last = now
		return MetricsResult{Queues: len(mq), Spiders: len(ms)}, nil
	}
}

// MetricsResult says how many EMF lines a metrics call wrote.
type MetricsResult struct {
	Queues  int `json:"queues"`
	Spiders int `json:"spiders"`
}

// Crawl runtimes (CRAWLQ_CRAWL_RUNTIME): where the crawl queue's jobs run.
const (
	CrawlOnLambda  = "lambda"  // worker Lambdas (in private subnets, behind NAT)
	CrawlOnFargate = "fargate" // runner tasks (in public subnets: no NAT processing per byte)
)

// RouteCrawlQueue applies CRAWLQ_CRAWL_RUNTIME to a dispatcher configuration. "lambda" (and
// unset) leaves the crawl queue to worker Lambdas. "fargate" takes it from them and gives it a
// fleet of runner tasks: runners with Queue "crawl", CRAWLQ_ECS_CRAWL_CONCURRENCY jobs each
// (default 20) and at most CRAWLQ_ECS_CRAWL_MAX_TASKS alive (default CRAWLQ_ECS_MAX_TASKS, else 10),
// with up to CRAWLQ_CRAWL_LAMBDA_BURST worker Lambdas while the tasks do not cover the backlog
// (default 0; see dispatch.Fleet.Burst).
func (d *Deps) RouteCrawlQueue(cfg *dispatch.Config, runners *ecsrun.Launcher) error {
	switch rt := strings.TrimSpace(d.Getenv("CRAWLQ_CRAWL_RUNTIME")); rt {
	case "", CrawlOnLambda:
		return nil
	case CrawlOnFargate:
		if runners == nil {
			return errors.New("CRAWLQ_CRAWL_RUNTIME=fargate needs the ECS runner settings (CRAWLQ_ECS_*)")
		}
		def, err := envInt(d.Getenv, "CRAWLQ_ECS_MAX_TASKS", 10)
		if err != nil {
			return err
		}
		max, err := envInt(d.Getenv, "CRAWLQ_ECS_CRAWL_MAX_TASKS", def)
		if err != nil {
			return err
		}
		conc, err := envInt(d.Getenv, "CRAWLQ_ECS_CRAWL_CONCURRENCY", 20)
		if err != nil {
			return err
		}
		burst, err := envInt(d.Getenv, "CRAWLQ_CRAWL_LAMBDA_BURST", 0)
		if err != nil {
			return err
		}
		crawl := *runners
		crawl.Queue, crawl.Concurrency, crawl.Max = "crawl", conc, max
		lq := []string{} // never nil: nil means the default, ["crawl"]
		for _, q := range cfg.LambdaQueues {
			if q != "crawl" {
				lq = append(lq, q)
			}
		}
		cfg.LambdaQueues = lq
		cfg.Fleets = append(cfg.Fleets, dispatch.Fleet{Queue: "crawl", Launcher: &crawl, Max: max, Burst: burst})
		return nil
	default:
		return fmt.Errorf("CRAWLQ_CRAWL_RUNTIME %q: want %s or %s", rt, CrawlOnLambda, CrawlOnFargate)
	}
}
