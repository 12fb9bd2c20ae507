package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/browser"
	"crawlq/internal/crawl"
	"crawlq/internal/demosite"
	"crawlq/internal/events"
	"crawlq/internal/fetch"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/runlog"
	"crawlq/internal/spider"
)

// kvFlag collects repeated key=value flags.
type kvFlag map[string]string

func (k kvFlag) String() string { return "" }
func (k kvFlag) Set(s string) error {
	key, val, ok := strings.Cut(s, "=")
	if !ok || key == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	k[key] = val
	return nil
}

func workerCmd() *Command {
	return &Command{
		Name: "worker", Synopsis: "run crawl workers until interrupted", Usage: "[--queues crawl,long] [--workers N] [--concurrency N] [--spiders DIR]",
		Help: `Claims and works jobs (spider runs, pages, no-ops) of the given queues until SIGINT or SIGTERM,
then stops claiming, releases the jobs it has not started and lets running ones finish.
Also runs maintenance every second (expired leases, due delayed jobs, finished runs) unless
--maintain-every 0, and with it the retention passes (of finished jobs and of what finished
runs leave behind, once a minute across all processes; settings: CRAWLQ_MAINTAIN=off and the
CRAWLQ_RETAIN_* variables, see docs/configuration.md). With maintenance, finished runs are also
judged against their monitors and run events are published (--event-bus): those of the runs this
worker starts or finishes at once, the others' at each maintenance round. Each verdict this
process makes (of any run, such as one crawlq demo left) writes a CloudWatch EMF line per monitor
to standard output ({"Monitor":...,"MonitorFailed":0,"_aws":...}, which CloudWatch reads on ECS)
unless standard output is a terminal (the log says they are dropped then; each run's log has the
verdicts); the log goes to standard error.
Spiders: the built-in specs plus those in --spiders.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			pg.wait = workerConnectWait
			queues := fs.String("queues", "crawl", "queues to work, comma-separated")
			workers := fs.Int("workers", 1, "workers per queue (at least 1)")
			conc := fs.Int("concurrency", 16, "jobs in flight per worker (1..10000)")
			dir := fs.String("spiders", "", "directory of extra spider specs")
			lease := fs.Duration("lease", 30*time.Second, "job lease length (at least 1s)")
			allowLoopback := fs.Bool("allow-loopback", false, "let crawls reach sites on this machine (127.0.0.0/8, ::1), e.g. a local test site; other non-public addresses stay refused unless a spider sets allow_private")
			every := maintainFlag(fs, time.Second, "how often to maintain the queue and the crawl (0 turns it, the retention passes and run events off)")
			eventBus := fs.String("event-bus", "", "with maintenance: EventBridge bus for run events, or off (default $CRAWLQ_EVENT_BUS, else \"default\" when AWS_ENDPOINT_URL names an emulator, else off)")
			return func(ctx context.Context, args []string) error {
				switch {
				case *workers < 1:
					return usageErr("--workers must be at least 1, got %d", *workers)
				case *conc < 1 || *conc > 10000:
					return usageErr("--concurrency must be 1..10000, got %d", *conc)
				case *lease < time.Second:
					return usageErr("--lease must be at least 1s, got %s", *lease)
				}
				se, err := readServiceEnv(env, every, *eventBus)
				if err != nil {
					return err
				}
				return pg.withPool(ctx, func(pool *pgxpool.Pool) error {
					ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
					defer stop()
					reg, err := node.LoadSpiders(*dir)
					if err != nil {
						return err
					}
					var evs *events.Loop
					if se.Every > 0 {
						if evs, err = eventLoop(ctx, pool, reg, se.Events, se.Every,
							monitorMetricsOut(env.Stdout, nil), runlog.Postgres{Pool: pool}, nil); err != nil {
							return err
						}
					}
					n, err := node.New(node.Config{Pool: pool, Spiders: reg, Queues: strings.Split(*queues, ","), Workers: *workers,
						Worker: queue.WorkerConfig{Concurrency: *conc, Lease: *lease}, MaintainEvery: se.Every, Maintain: se.Maintain, Events: evs,
						Fetch: fetch.Config{AllowLoopback: *allowLoopback}, Browser: &browser.Config{}, ProxyEnv: se.ProxyEnv})
					if err != nil {
						return err
					}
					// A person who started it in the background sees it is up, and what it works.
					slog.Info("worker started: claiming jobs until interrupted", "queues", *queues, "workers", *workers,
						"concurrency", *conc, "allow_loopback", *allowLoopback, "maintenance", se.Every > 0)
					return n.Run(ctx)
				})
			}
		},
	}
}

func scheduleCmd() *Command {
	return &Command{
		Name: "schedule", Synopsis: "schedule a spider run", Usage: "--spider NAME [--version V] [--arg k=v]... [--settings JSON] [--delay D | --at T] [--key K]",
		Help: `Schedules a run of a spider and prints its id. The run runs the spider's newest version when
it starts (the newest stored one, else the spec loaded in-process), or with --version the stored
version given (crawlq spider versions NAME); every page of the run runs that one version, and the
run records it. --settings overrides the spider's settings for this run (delay, concurrency,
max_pages, max_depth, user_agent, obey_robots), as schedules add --settings does. With --key, scheduling is idempotent: while a run of the spider with that key is
unfinished, the same run is returned: its id printed, and a note on standard error (with --replace,
its start time moves if it has not started).

A running crawlq local on the same database acts on it at once (the command sends NOTIFY
crawlq_wake); for a deployed stack, set CRAWLQ_DISPATCH_FUNCTION to its dispatch function and the
command pokes it with your AWS credentials (else the stack's minute tick acts on it). A run on
a queue other than crawl that no live worker works (a spider with runtime ecs runs on the long
queue: crawlq runner works it, crawlq worker only with --queues crawl,long) is said so on
standard error and in the run's log.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			var p crawl.ScheduleParams
			args := kvFlag{}
			fs.StringVar(&p.Spider, "spider", "", "spider name (required)")
			fs.StringVar(&p.Version, "version", "", "stored version of the spider to run (default: the newest when the run starts)")
			fs.Var(args, "arg", "spider argument key=value (repeatable), e.g. base_url=http://127.0.0.1:8088")
			fs.IntVar(&p.Priority, "priority", 0, "priority, -1000..1000")
			fs.DurationVar(&p.Delay, "delay", 0, "start after this long")
			at := fs.String("at", "", "start at this time (RFC 3339; not more than a day in the past)")
			fs.StringVar(&p.IdempotencyKey, "key", "", "idempotency key")
			fs.BoolVar(&p.Replace, "replace", false, "with --key: move the pending run's start time")
			settings := fs.String("settings", "", `crawlq setting overrides for this run as JSON, e.g. {"max_pages":100,"delay":"500ms"}`)
			dir := fs.String("spiders", "", "directory of extra spider specs")
			return func(ctx context.Context, rest []string) error {
				wenv, err := readWakeEnv(env)
				if err != nil {
					return err
				}
				if p.Spider == "" {
					return usageErr("--spider is required")
				}
				if *settings != "" {
					if p.Settings, err = crawl.DecodeOverrides([]byte(*settings), "settings"); err != nil {
						return usageErr("--settings: %v", err)
					}
				}
				if p.Replace && p.IdempotencyKey == "" {
					return usageErr("--replace needs --key (it moves the start of the pending run with that key)")
				}
				if *at != "" {
					t, err := parseAt(*at)
					if err != nil {
						return err
					}
					p.RunAt = t
				}
				p.Args = args
				return pg.withNode(ctx, *dir, func(n *node.Node) error {
					s, err := n.Crawler.Schedule(ctx, p)
					if errors.Is(err, spider.ErrUnknownSpider) {
						return fmt.Errorf("%w%s (crawlq spider list shows the stored spiders; crawlq spider push FILE adds one)",
							err, spider.Suggest(p.Spider, n.Spiders.Names()...))
					}
					if err != nil {
						return err
					}
					wakeDispatch(ctx, env, wenv, n.Queue.Pool(), s.RunID)
					// Standard output is the id alone, for id=$(crawlq schedule ...); a duplicate is said on
					// standard error.
					fmt.Fprintln(env.Stdout, s.RunID)
					if s.Duplicate {
						fmt.Fprintf(env.Stderr, "run %d is the existing %s run with key %q (not scheduled again)\n", s.RunID, s.State, p.IdempotencyKey)
					}
					// A run on a queue nobody works (an ecs spider's long queue, beside a crawlq
					// worker of crawl) would wait silently: said on standard error.
					r, err := n.Crawler.Get(ctx, s.RunID)
					if err != nil {
						return err
					}
					return noteQueue(ctx, env.Stderr, n, s.RunID, r.Queue)
				})
			}
		},
	}
}

func runsCmd() *Command {
	return &Command{
		Name: "runs", Synopsis: "list spider runs", Usage: "[--spider NAME] [--state S|monitors_failed,...] [--limit N] [--json]",
		Help: `Lists runs newest first with their stats; a run judged with a failed monitor shows its state as
"succeeded (monitors failed)" (crawlq run's outcome monitors_failed), and --state monitors_failed
selects those runs. With --spider, a history: each run's figures (a
succeeded run's with their change against the last succeeded run before it: a cancelled or failed
run stopped part way, so it is not a baseline), its monitors' verdict (and which failed) and its field
coverage (each field's share of the run's items). --json adds each run's report.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			var p crawl.ListParams
			fs.StringVar(&p.Spider, "spider", "", "only this spider")
			states := fs.String("state", "", "only these states: "+strings.Join(crawl.States, ", ")+"; or the outcome "+outcomeMonitorsFailed+" (a run judged with a failed monitor)")
			fs.IntVar(&p.Limit, "limit", 20, "at most this many (1..1000)")
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, args []string) error {
				if *states != "" {
					p.States = strings.Split(*states, ",")
				}
				return pg.withNode(ctx, "", func(n *node.Node) error {
					views, err := listRuns(ctx, n, p)
					if err != nil {
						return err
					}
					if *asJSON {
						return writeJSON(env.Stdout, views)
					}
					if p.Spider != "" {
						return printHistory(env.Stdout, views)
					}
					return printRunTable(env.Stdout, views)
				})
			}
		},
	}
}

// parseRunID reads a run id (the one positional argument of the commands that take it).
func parseRunID(args []string) (int64, error) {
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id <= 0 {
		return 0, usageErr("run id %q: want a positive integer", args[0])
	}
	return id, nil
}

func cancelRunCmd() *Command {
	return &Command{
		Name: "cancel-run", Synopsis: "cancel a spider run", Usage: "ID", Args: one("run ID"),
		Help: `Cancels a run: its waiting page jobs at once, its running ones at their next heartbeat. The run
ends as cancelled once nothing of it is left. A running command spider gets SIGINT (Scrapy, which
shuts down gracefully) or SIGTERM; cancelling it again sends the signal again, on which Scrapy
forces its shutdown.

A running crawlq local on the same database acts on it at once (the command sends NOTIFY
crawlq_wake); for a deployed stack, set CRAWLQ_DISPATCH_FUNCTION to its dispatch function and the
command pokes it with your AWS credentials (else the stack's minute tick acts on it). A run on
a queue other than crawl that no live worker works (a spider with runtime ecs runs on the long
queue: crawlq runner works it, crawlq worker only with --queues crawl,long) is said so on
standard error and in the run's log.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pg := dbFlag(fs, env)
			return func(ctx context.Context, args []string) error {
				wenv, err := readWakeEnv(env)
				if err != nil {
					return err
				}
				id, err := parseRunID(args)
				if err != nil {
					return err
				}
				return pg.withNode(ctx, "", func(n *node.Node) error {
					// Recorded as the api records a cancel: a running command gets SIGINT (Scrapy)
					// or SIGTERM again at each cancel-run, so a second one forces Scrapy's shutdown.
					run, err := n.Crawler.Get(ctx, id)
					if err != nil {
						return err
					}
					if !run.Finished() {
						if _, err := n.Store.RequestCancel(ctx, id, run.Spider, ""); err != nil {
							return err
						}
					}
					if err := n.Crawler.Cancel(ctx, id); err != nil {
						return err
					}
					wakeDispatch(ctx, env, wenv, n.Queue.Pool(), id)
					fmt.Fprintf(env.Stdout, "run %d: cancel requested\n", id)
					return nil
				})
			}
		},
	}
}

func demoSiteCmd() *Command {
	return &Command{
		Name: "demo-site", Synopsis: "serve the demo catalogue on 127.0.0.1", Usage: "[--addr 127.0.0.1:8088] [--items N] [--generation N --change PCT --delete PCT] | --print-spec js|js-plain",
		Help: `Serves the deterministic synthetic catalogue the demo spider crawls: listing pages with
pagination, item pages, duplicate links, a redirect, a 404, a robots.txt-disallowed section and
a slow page. Pages carry ETag and Last-Modified and answer 304 to conditional requests;
robots.txt names a sitemap index (/sitemap.xml) of gzipped children with lastmod. Prints what a
correct crawl yields, then serves until interrupted.

To try a recrawl (docs/recrawl.md), serve the site again at the next --generation: each
generation changes --change percent of the live items (a new price) and deletes --delete percent,
the same ones for the same --seed.

--print-spec prints a spider spec for the site's script-drawn section (/js/, docs/browser.md)
instead of serving: js renders its item pages in a browser (spider js), js-plain fetches them
plainly and finds no item (spider js_plain). Push it, then schedule it with
--arg base_url=http://ADDR.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			addr := fs.String("addr", "127.0.0.1:8088", "listen address (loopback)")
			var cfg demosite.Config
			fs.IntVar(&cfg.Items, "items", 1200, "item pages")
			fs.IntVar(&cfg.PerPage, "per-page", 24, "items per listing page")
			fs.StringVar(&cfg.Markup, "markup", "", "item page markup: \"\" (what the demo spider expects), redesign (its selectors match nothing) or no-category (every third item lacks its category)")
			fs.IntVar(&cfg.Generation, "generation", 0, "serve the catalogue as it is after this many generations of changes")
			fs.IntVar(&cfg.ChangePercent, "change", 0, "percent of the live items each generation changes (0..100)")
			fs.IntVar(&cfg.DeletePercent, "delete", 0, "percent of the live items each generation deletes (0..100)")
			fs.Int64Var(&cfg.Seed, "seed", 0, "which items the generations change and delete")
			printSpec := fs.String("print-spec", "", "print the spider spec of the script-drawn section, js (rendered) or js-plain, and exit")
			return func(ctx context.Context, args []string) error {
				if *printSpec != "" {
					spec, ok := jsSpec(*printSpec)
					if !ok {
						return usageErr("--print-spec %q: want js or js-plain", *printSpec)
					}
					_, err := io.WriteString(env.Stdout, spec)
					return err
				}
				if err := cfg.Validate(); err != nil {
					return usageErr("%v", err)
				}
				ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
				site := demosite.New(cfg)
				a, err := site.Serve(ctx, *addr)
				if errors.Is(err, syscall.EADDRINUSE) {
					return fmt.Errorf("%s is in use: a demo site started earlier may still serve there (the same flags serve the same catalogue); stop that process (jobs -l in the shell that started it lists it; kill %%N stops it) or pass --addr 127.0.0.1:PORT: %w", *addr, err)
				}
				if err != nil {
					return err
				}
				exp := site.Expected()
				fmt.Fprintf(env.Stdout, "demo site at http://%s/ — a correct crawl yields %d items from %d pages (%d disallowed by robots.txt, 1 redirect, %d not found)\n",
					a, exp.Items, exp.Pages, exp.Disallowed, exp.NotFound)
				if ch := site.LastChanges(); ch.Generation > 0 {
					fmt.Fprintf(env.Stdout, "generation %d: its step changed %d items and deleted %d\n", ch.Generation, len(ch.Changed), len(ch.Deleted))
				}
				<-ctx.Done()
				return nil
			}
		},
	}
}

// jsSpec is the spec --print-spec prints for name, js or js-plain: one source for scripts
// (scripts/soak-browser.sh) and the tests and benchmarks that call demosite.JSSpec.
func jsSpec(name string) (string, bool) {
	switch name {
	case "js":
		return demosite.JSSpec("js", true), true
	case "js-plain":
		return demosite.JSSpec("js_plain", false), true
	}
	return "", false
}

var errDemoMismatch = errors.New("the demo crawl did not yield what the site expects")
