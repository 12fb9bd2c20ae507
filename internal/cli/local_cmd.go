package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"crawlq/internal/awsx"
	"crawlq/internal/db"
	"crawlq/internal/envconfig"
	"crawlq/internal/events"
	"crawlq/internal/fetch"
	"crawlq/internal/lambdafn"
	"crawlq/internal/local"
	"crawlq/internal/migrate"
	"crawlq/internal/runlog"
	"crawlq/internal/scrapyd"
)

// eventsWhere says where crawlq local's run events go, for its banner.
func eventsWhere(getenv func(string) string) string {
	bus := getenv("CRAWLQ_EVENT_BUS")
	if path, ok := events.FileBus(bus); ok {
		return fmt.Sprintf("appended to %s as JSON Lines, in EventBridge's envelope (tail -f %s)", path, path)
	}
	if strings.EqualFold(bus, lambdafn.EventsOff) {
		return "not published (no EventBridge here: --event-bus file:PATH appends them to a JSON Lines file, " +
			"--event-bus BUS with AWS_ENDPOINT_URL naming an emulator publishes them); " +
			"runs are still judged, and each run's state changes are in its log (crawlq logs RUN_ID)"
	}
	if ep := getenv("AWS_ENDPOINT_URL"); ep != "" {
		return fmt.Sprintf("EventBridge bus %q at %s", bus, ep)
	}
	return fmt.Sprintf("EventBridge bus %q of the AWS account and region the environment names", bus)
}

// localMaxConns is crawlq local's pool size when CRAWLQ_DB_MAX_CONNS does not set it: the four
// functions' handlers and the workers share it.
const localMaxConns = 30

// localCmd is `crawlq local`: the four Lambda functions in-process behind the Lambda Invoke API.
func localCmd() *Command {
	return &Command{
		Name: "local", Synopsis: "run the Lambda functions locally behind the Lambda Invoke API", Usage: "[flags]",
		Help: `Runs crawlq-api, crawlq-worker, crawlq-dispatch and crawlq-metrics in this process and serves
the Lambda Invoke REST API, so the AWS CLI works against it as against AWS:

  aws lambda invoke --endpoint-url http://127.0.0.1:3001 --function-name crawlq-api \
      --payload '{"action":"schedule","spider":"demo","args":{"base_url":"http://127.0.0.1:8088"}}' out.json

(AWS CLI v2 also needs --cli-binary-format raw-in-base64-out; and --allow-loopback for a site
on this machine, like that one: the workers refuse every non-public address by default, as on
AWS.) The Scrapyd-compatible HTTP API
listens on --scrapyd-addr (scrapyd-deploy, ScrapydWeb and curl work against it unchanged). Dispatch
ticks every --tick, and at once after each schedule, cancel or redrive, whether it came through the
api, the Scrapyd API or the CLI (crawlq schedule, cancel-run, redrive: they NOTIFY crawlq_wake on
the database, which this process listens to); runs with nothing left are finished every second.
Recurring runs (the api's addschedule, or crawlq schedules add) are kept in the database and fired
here on time, each tick once, across restarts. The long-crawl queue (command and Scrapy spiders)
is worked by an in-process runner of --runners concurrency, as an always-on ECS task would. The
database schema is migrated at start. Finished runs are judged against their spiders' monitors
and run events go to EventBridge (--event-bus) as on AWS: the api, worker and runner publish
those of the runs they change at once, each dispatch tick the rest; the banner says where they go.
Stops on SIGINT/SIGTERM, releasing every claimed job.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			f := declareLocalFlags(fs)
			return func(ctx context.Context, args []string) error {
				if err := f.check(); err != nil {
					return err
				}
				// Stop cleanly (releasing claimed jobs) on Ctrl-C or a service manager's SIGTERM.
				ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
				getenv := f.getenv(env)
				// CloudWatch's EMF lines, left out at a terminal (said once).
				emf := monitorMetricsOut(env.Stdout, nil)
				deps, awsCfg, err := openLocalDeps(ctx, env, getenv, emf)
				if err != nil {
					return err
				}
				defer deps.Close(context.WithoutCancel(ctx))
				if *f.specDir != "" {
					if err := pushSpiders(ctx, env.Stderr, deps.Control.Store, *f.specDir, ""); err != nil {
						return err
					}
				}
				st, err := local.New(local.Config{Deps: deps, Prefix: *f.prefix, Tick: *f.tick, WorkerTimeout: *f.workerTimeout,
					Worker: lambdafn.WorkerOptions{IdleExit: *f.idle, Fetch: fetch.Config{AllowLoopback: *f.allowLoopback},
						ProxyEnv: envconfig.ProxyEnv(env.environ())},
					Metrics: emf, Runners: *f.runners, CommandEnv: commandEnv(env)})
				if err != nil {
					return err
				}
				ln, err := net.Listen("tcp", *f.addr)
				if err != nil {
					return fmt.Errorf("listen: %w", err)
				}
				printLocalBanner(env, st, ln, *f.tick, getenv)
				sln, user, pass, err := f.listenScrapyd(ctx, fs, env, deps, &awsCfg)
				if err != nil {
					ln.Close()
					return err
				}
				// A Scrapyd API that fails (to start or later) stops the whole of local at once,
				// with its error, rather than leaving the rest serving without it.
				ctx, stopAll := context.WithCancel(ctx)
				defer stopAll()
				scrapydDone := make(chan error, 1)
				if sln == nil {
					scrapydDone <- nil
				} else {
					go func() { scrapydDone <- f.serveScrapyd(ctx, st, sln, deps, user, pass, stopAll) }()
				}
				err = st.Serve(ctx, ln)
				return errors.Join(err, <-scrapydDone)
			}
		},
	}
}

// localFlags are crawlq local's flags.
type localFlags struct {
	addr, prefix, specDir, scrapydAddr, dbURL, eventBus *string
	tick, workerTimeout, idle                           *time.Duration
	maxUpload                                           *int64
	allowLoopback                                       *bool
	runners                                             *int
}

// declareLocalFlags declares crawlq local's flags on fs.
func declareLocalFlags(fs *flag.FlagSet) *localFlags {
	return &localFlags{
		addr:          fs.String("addr", "127.0.0.1:3001", "address of the Lambda Invoke API"),
		tick:          fs.Duration("tick", time.Minute, "how often dispatch ticks by itself"),
		workerTimeout: fs.Duration("worker-timeout", 5*time.Minute, "timeout of one worker invocation"),
		idle:          fs.Duration("worker-idle", 10*time.Second, "a worker invocation ends after this long without work"),
		prefix:        fs.String("prefix", "crawlq", "function name prefix (<prefix>-api, ...)"),
		maxUpload:     fs.Int64("scrapyd-max-upload", 51<<20, "largest Scrapyd API request body in bytes (an addversion egg); positive"),
		specDir:       fs.String("spiders", "", "push the specs in this directory to the stack's spiders at start (all or nothing)"),
		allowLoopback: fs.Bool("allow-loopback", false, "let crawls reach sites on this machine (127.0.0.0/8, ::1), e.g. a local test site; other non-public addresses stay refused unless a spider sets allow_private"),
		runners:       fs.Int("runners", 4, "concurrency of the in-process runner for the long-crawl queue (command and Scrapy spiders); 0: none"),
		scrapydAddr: fs.String("scrapyd-addr", "127.0.0.1:6800", "address of the Scrapyd-compatible HTTP API; empty: off "+
			"(basic auth from $CRAWLQ_SCRAPYD_USERNAME and $CRAWLQ_SCRAPYD_PASSWORD)"),
		dbURL:    fs.String("database-url", "", "PostgreSQL URL (default $DATABASE_URL)"),
		eventBus: fs.String("event-bus", "", "EventBridge bus for run events, file:PATH for a JSON Lines file, or off (default $CRAWLQ_EVENT_BUS, else \"default\" when AWS_ENDPOINT_URL names an emulator, else off)"),
	}
}

// check refuses bad flag values, naming the flag.
func (f *localFlags) check() error {
	switch {
	case *f.tick <= 0:
		return usageErr("--tick must be positive, got %s", *f.tick)
	case *f.workerTimeout <= 0:
		return usageErr("--worker-timeout must be positive, got %s", *f.workerTimeout)
	case *f.idle <= 0:
		return usageErr("--worker-idle must be positive, got %s", *f.idle)
	case *f.runners < 0:
		return usageErr("--runners must be ≥ 0 (0: none), got %d", *f.runners)
	case *f.maxUpload <= 0:
		return usageErr("--scrapyd-max-upload must be positive, got %d", *f.maxUpload)
	}
	return nil
}

// getenv is the environment the four functions read: env's, with --database-url standing for
// DATABASE_URL and --event-bus (localEventBus) for CRAWLQ_EVENT_BUS.
func (f *localFlags) getenv(env *Env) func(string) string {
	return func(k string) string {
		if k == "DATABASE_URL" && *f.dbURL != "" {
			return *f.dbURL
		}
		if k == "CRAWLQ_EVENT_BUS" {
			return localEventBus(*f.eventBus, env.Getenv)
		}
		return env.Getenv(k)
	}
}

// openLocalDeps reads the functions' settings (before anything connects, so a bad value stops
// crawlq local at once, naming its variable), opens and migrates the database and assembles the
// functions' dependencies.
func openLocalDeps(ctx context.Context, env *Env, getenv func(string) string, metricsOut io.Writer) (*lambdafn.Deps, aws.Config, error) {
	lc, err := lambdafn.LoadConfig(envconfig.New(getenv))
	if err != nil {
		return nil, aws.Config{}, usageErr("%v", err)
	}
	logger, err := lambdafn.NewLogger(lc.LogLevel, env.Stderr)
	if err != nil {
		return nil, aws.Config{}, usageErr("%v", err)
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	awsCfg, err := awsx.Load(octx)
	if err != nil {
		return nil, aws.Config{}, err
	}
	dc, err := envconfig.DB(octx, envconfig.New(getenv), awsCfg, localMaxConns)
	if err != nil {
		return nil, aws.Config{}, noDatabaseHint(err)
	}
	pool, err := db.Open(octx, dc)
	if err != nil {
		return nil, aws.Config{}, err
	}
	if _, err := migrate.Up(octx, pool); err != nil {
		pool.Close()
		return nil, aws.Config{}, fmt.Errorf("migrate: %w", err)
	}
	deps, err := lambdafn.NewDepsConfig(pool, awsCfg, nil, lc, logger, metricsOut)
	if err != nil {
		pool.Close()
		return nil, aws.Config{}, err
	}
	return deps, awsCfg, nil
}

// printLocalBanner says where crawlq local serves what.
func printLocalBanner(env *Env, st *local.Stack, ln net.Listener, tick time.Duration, getenv func(string) string) {
	fmt.Fprintf(env.Stderr, "crawlq local: Lambda Invoke API on http://%s (functions %v)\n", ln.Addr(), st.Functions())
	fmt.Fprintf(env.Stderr, "crawlq local: dispatch every %s, and at once on each schedule, cancel or redrive (the CLI's too)\n", tick)
	if st.SchedulesHere() {
		fmt.Fprintln(env.Stderr, "crawlq local: recurring runs: kept in the database and fired here (crawlq schedules, or the api's addschedule)")
	}
	fmt.Fprintf(env.Stderr, "crawlq local: run events: %s\n", eventsWhere(getenv))
}

// listenScrapyd opens the Scrapyd API's listener and reads its credentials; nil when it is off,
// or when its default address is taken (a real Scrapyd's, perhaps: said, and the rest served).
func (f *localFlags) listenScrapyd(ctx context.Context, fs *flag.FlagSet, env *Env, deps *lambdafn.Deps, awsCfg *aws.Config) (net.Listener, string, string, error) {
	if *f.scrapydAddr == "" {
		return nil, "", "", nil
	}
	user, pass, err := scrapyd.Credentials(ctx, deps.Config.API.Scrapyd, awsCfg)
	if err != nil {
		return nil, "", "", err
	}
	sln, err := net.Listen("tcp", *f.scrapydAddr)
	if err == nil {
		auth := "no auth"
		if user != "" {
			auth = "basic auth"
		}
		fmt.Fprintf(env.Stderr, "crawlq local: Scrapyd API on http://%s (%s)\n", sln.Addr(), auth)
		return sln, user, pass, nil
	}
	if set(fs, "scrapyd-addr") {
		return nil, "", "", fmt.Errorf("listen (scrapyd): %w", err)
	}
	fmt.Fprintf(env.Stderr, "crawlq local: WARNING: no Scrapyd API: %v (choose a port with --scrapyd-addr)\n", err)
	return nil, "", "", nil
}

// serveScrapyd serves the Scrapyd API on sln until ctx ends; a failure stops the rest (stopAll).
func (f *localFlags) serveScrapyd(ctx context.Context, st *local.Stack, sln net.Listener, deps *lambdafn.Deps, user, pass string, stopAll func()) error {
	err := st.ServeScrapyd(ctx, sln, scrapyd.Config{Store: deps.Control.Store, Pool: deps.Pool,
		RunLog: runlog.Postgres{Pool: deps.Pool}, Username: user, Password: pass, MaxUploadBytes: *f.maxUpload})
	if err != nil {
		err = fmt.Errorf("scrapyd API: %w", err)
		stopAll()
	}
	return err
}
