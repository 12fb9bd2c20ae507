package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/command"
	"crawlq/internal/ecsrun"
	"crawlq/internal/events"
	"crawlq/internal/fetch"
	"crawlq/internal/node"
	"crawlq/internal/runlog"
	"crawlq/internal/runner"
)

// runnerCmd is `crawlq runner`, the entry point of the ECS runner image.
func runnerCmd() *Command {
	return &Command{
		Name: "runner", Synopsis: "run the ECS runner: long crawls and command spiders", Usage: "[flags]",
		Help: `Claims jobs of the long-crawl queue (runs of spiders declared runtime: ecs, and command
spiders) up to --concurrency at once, as a worker of kind "ecs" (the dispatcher counts live
runners from Postgres). On SIGTERM (Fargate Spot's warning, scale-in) it stops claiming, lets
running jobs finish within --grace, then cancels and releases the rest without counting their
attempt; keep --grace plus --kill-grace below the task's stopTimeout (at most 120s).

With CRAWLQ_ITEMS_BUCKET set (the AWS stack's runner_items_to_s3), items go to that S3 bucket
under items/, as the worker Lambda writes them; else to Postgres.

It recycles itself, exiting with status 0, after --max-jobs jobs or when its resident memory
passes --max-memory-mib, so that a fresh task replaces it.

With maintenance (--maintain-every), it judges finished runs against their monitors and publishes
run events (--event-bus): those of the runs it starts or finishes at once, the others' at each
maintenance round.

Flags not given default to the environment the dispatcher's RunTask overrides set:
CRAWLQ_QUEUE, CRAWLQ_CONCURRENCY, CRAWLQ_MAX_JOBS, CRAWLQ_MAX_MEMORY_MIB, CRAWLQ_STOP_GRACE,
and CRAWLQ_SPIDER_DIR.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			f := declareRunnerFlags(fs, env)
			return func(ctx context.Context, args []string) error {
				if err := f.fromEnv(fs, env); err != nil {
					return err
				}
				if err := f.check(); err != nil {
					return err
				}
				re, err := readRunnerEnv(env, f.every, *f.eventBus)
				if err != nil {
					return err
				}
				return f.pg.withPool(ctx, func(pool *pgxpool.Pool) error {
					log := slog.New(slog.NewJSONHandler(env.Stderr, nil))
					r, err := f.assemble(ctx, pool, re, env, log)
					if err != nil {
						return err
					}
					ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
					defer stop()
					reason, err := r.Run(ctx)
					if err != nil {
						return err
					}
					fmt.Fprintf(env.Stdout, "runner stopped: %s\n", reason)
					return nil
				})
			}
		},
	}
}

// runnerFlags are crawlq runner's flags.
type runnerFlags struct {
	pg                                  *database
	queue, dir, eventBus                *string
	conc, maxJobs                       *int
	maxMem                              *int64
	grace, lease, cmdTimeout, killGrace *time.Duration
	shutdownGrace                       *time.Duration
	allowLoopback                       *bool
	every                               *maintainEvery
}

// runnerFlagEnv are the variables the dispatcher's RunTask overrides set, by the flag each is the
// default of.
var runnerFlagEnv = map[string]string{"queue": ecsrun.EnvQueue, "concurrency": ecsrun.EnvConcurrency, "grace": ecsrun.EnvStopGrace,
	"max-jobs": ecsrun.EnvMaxJobs, "max-memory-mib": ecsrun.EnvMaxMemory, "spiders": "CRAWLQ_SPIDER_DIR"}

// declareRunnerFlags declares crawlq runner's flags on fs.
func declareRunnerFlags(fs *flag.FlagSet, env *Env) *runnerFlags {
	f := &runnerFlags{pg: dbFlag(fs, env)}
	f.pg.wait = workerConnectWait
	f.queue = fs.String("queue", "long", "queue to work ($"+ecsrun.EnvQueue+")")
	f.conc = fs.Int("concurrency", 6, "jobs at once ($"+ecsrun.EnvConcurrency+")")
	f.grace = fs.Duration("grace", 100*time.Second, "after SIGTERM, how long running jobs may finish ($"+ecsrun.EnvStopGrace+")")
	f.maxJobs = fs.Int("max-jobs", 0, "exit after this many jobs; 0: no limit ($"+ecsrun.EnvMaxJobs+")")
	f.maxMem = fs.Int64("max-memory-mib", 0, "exit when resident memory passes this many MiB; 0: no limit ($"+ecsrun.EnvMaxMemory+")")
	f.dir = fs.String("spiders", "", "directory of extra spider specs ($CRAWLQ_SPIDER_DIR)")
	f.lease = fs.Duration("lease", 30*time.Second, "job lease (heartbeats renew it every third of it)")
	f.allowLoopback = fs.Bool("allow-loopback", false, "let crawls reach sites on this machine (127.0.0.0/8, ::1), e.g. a local test site; other non-public addresses stay refused unless a spider sets allow_private")
	f.every = maintainFlag(fs, 10*time.Second, "how often to maintain the queue and the crawl (rescue expired leases, sweep finished runs) and publish run events; 0: never (and no retention passes, no run events)")
	f.eventBus = fs.String("event-bus", "", "with maintenance: EventBridge bus for run events, or off (default $CRAWLQ_EVENT_BUS, else \"default\" when AWS_ENDPOINT_URL names an emulator, else off)")
	f.cmdTimeout = fs.Duration("command-timeout", 12*time.Hour, "kill a command spider after this, unless its spec sets a timeout")
	f.killGrace = fs.Duration("kill-grace", 10*time.Second, "between SIGTERM and SIGKILL to a command spider's processes")
	f.shutdownGrace = fs.Duration("shutdown-grace", 10*time.Minute, "how long a cancelled or timed-out Scrapy run may shut down gracefully after its stop signal (SIGINT, or the cancel's signal=) before SIGKILL")
	return f
}

// fromEnv sets the flags not given on the command line from the variables of runnerFlagEnv.
func (f *runnerFlags) fromEnv(fs *flag.FlagSet, env *Env) error {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	for name, key := range runnerFlagEnv {
		if v := env.Getenv(key); v != "" && !set[name] {
			if err := fs.Set(name, v); err != nil {
				return usageErr("$%s=%q: %v", key, v, err)
			}
		}
	}
	return nil
}

// check refuses bad flag values, naming the flags (and the variables that set them), rather than
// leaving them to runner.New, whose errors name its Config's fields.
func (f *runnerFlags) check() error {
	switch {
	case *f.maxMem < 0 || *f.maxMem > 1<<30:
		return usageErr("--max-memory-mib must be 0..%d (it or $%s), got %d", 1<<30, ecsrun.EnvMaxMemory, *f.maxMem)
	case *f.conc < 1 || *f.conc > 1000:
		return usageErr("--concurrency must be 1..1000 (it or $%s), got %d", ecsrun.EnvConcurrency, *f.conc)
	case *f.lease < time.Second:
		return usageErr("--lease must be at least 1s, got %s", *f.lease)
	case *f.grace < 0:
		return usageErr("--grace must be ≥ 0 (it or $%s), got %s", ecsrun.EnvStopGrace, *f.grace)
	case *f.killGrace < 0:
		return usageErr("--kill-grace must be ≥ 0, got %s", *f.killGrace)
	case *f.shutdownGrace <= 0:
		return usageErr("--shutdown-grace must be positive, got %s", *f.shutdownGrace)
	case *f.grace+*f.killGrace >= runner.MaxStopTimeout:
		return usageErr("--grace plus --kill-grace must be below %s (the ECS stopTimeout limit), got %s", runner.MaxStopTimeout, *f.grace+*f.killGrace)
	case *f.maxJobs < 0:
		return usageErr("--max-jobs must be ≥ 0, 0 for no limit (it or $%s), got %d", ecsrun.EnvMaxJobs, *f.maxJobs)
	case *f.cmdTimeout <= 0:
		return usageErr("--command-timeout must be positive, got %s", *f.cmdTimeout)
	}
	return nil
}

// assemble builds the runner on pool: its run log, items sink and artifacts, spiders and, with
// maintenance, its event loop.
func (f *runnerFlags) assemble(ctx context.Context, pool *pgxpool.Pool, re runnerEnv, env *Env, log *slog.Logger) (*runner.Runner, error) {
	cc := command.Config{Timeout: *f.cmdTimeout, KillGrace: *f.killGrace, ShutdownGrace: *f.shutdownGrace, Env: re.CommandEnv}
	var runLog runlog.Store = runlog.Postgres{Pool: pool}
	if g := re.RunLogGroup; g != "" { // the AWS stack: run logs in CloudWatch
		var err error
		if runLog, err = cloudWatchLog(ctx, g); err != nil {
			return nil, err
		}
		cc.RunLog = runLog
	}
	sink, arts, err := runnerBucket(ctx, pool, re.ItemsBucket)
	if err != nil {
		return nil, err
	}
	reg, err := node.LoadSpiders(*f.dir)
	if err != nil {
		return nil, err
	}
	var evs *events.Loop
	if re.Every > 0 {
		if evs, err = eventLoop(ctx, pool, reg, re.Events, re.Every, monitorMetricsOut(env.Stdout, log), runLog, log); err != nil {
			return nil, err
		}
	}
	r, err := runner.New(runner.Config{
		Pool: pool, Queue: *f.queue, Concurrency: *f.conc, Lease: *f.lease, StopGrace: *f.grace, MaxJobs: *f.maxJobs,
		MaxMemory: *f.maxMem << 20, MaintainEvery: re.Every, Maintain: re.Maintain, Spiders: reg, Events: evs, Logger: log,
		Command: cc, Fetch: fetch.Config{AllowLoopback: *f.allowLoopback}, ProxyEnv: re.ProxyEnv, Artifacts: arts, Sink: sink,
	})
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return r, nil
}
