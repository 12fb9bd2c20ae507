package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	neturl "net/url"
	"os"
	"runtime/pprof"
	"strings"
	"text/tabwriter"

	"crawlq/internal/bench"
)

func benchCmd() *Command {
	return &Command{
		Name: "bench", Synopsis: "measure queue (and crawl) throughput beside the peers", Usage: "[--jobs N] [--op insert,work,unique|crawl|recrawl|dbcost|soak] [--render browser] [--backlog M] [--cpuprofile FILE] [--memprofile FILE]",
		Help: `Measures the queue on the database at DATABASE_URL (pgx's query exec mode from the URL's
default_query_exec_mode or CRAWLQ_DB_EXEC_MODE, as for every command), in a schema of its own (--schema, emptied
first): inserts --jobs no-op jobs, then burns them down with workers in this process, and prints
RESULT lines in the format of ../shared/bench/peers/run.sh so the figures sit beside River's,
graphile-worker's and the SQL ceiling's from the same run:

  RESULT system=crawlq op=insert|work|unique jobs=N seconds=S jobs_per_s=R
  RESULT system=crawlq op=claim_latency backlog=M p50_ms=… p99_ms=…

--op unique enqueues N jobs with unique keys in replace mode, half of them hitting a key
already present. --backlog M first adds M delayed and M finished jobs. After the work phase,
claim_latency times 1000 one-job claims (each with its commit) on the otherwise idle queue,
backlog still present: what a deep backlog costs a claim. --op crawl --url URL crawls the synthetic catalogue of
../shared/bench/site at URL with spiders/benchsite.yaml and prints

  RESULT system=crawlq op=crawl pages=N items=M seconds=S pages_per_s=R allocs_per_page=A
    cpu_s=C cpu_s_per_1k_pages=… pg_cpu_s=P pg_cpu_s_per_1k_pages=… total_cpu_s_per_1k_pages=…
    pg_backends_cpu_s_per_1k_pages=… own_total_cpu_s_per_1k_pages=…

(one line): the heap allocations of this process per page, and the user+system CPU of this
process and of the Postgres server (the postmaster and its children, read from /proc; "na" when
the server does not run on this machine) during the crawl; pg_backends is the crawl's own
backends alone (not the server's other work, its own or on a shared server others'), and
own_total this process's CPU plus theirs. scripts/bench-crawl.sh puts them
beside Colly's on the same site (MODE=chain or wide).
Then what a page cost the database: RESULT system=crawlq op=crawl_dbcost pages=N statements_per=… round_trips_per=…
rows_written_per=… wal_bytes_per=… xacts_per=… … schema_rows_written_per=… (statements from
pg_stat_statements when it is installed, else as sent; schema_rows_written_per counts the rows
written to the bench schema's tables and their TOAST tables alone, where rows_written_per counts the whole database's). --op dbcost measures the same per job of --jobs no-op jobs inserted and
worked, as River is measured by scripts/bench-dbcost.sh.

--op recrawl --url URL crawls the demo site at URL (crawlq demo-site --items 10000) with the demo
spider three times: in full as always (op=crawl_always), then set to revisit: changed_only
(docs/recrawl.md) a first time, recording its URL state (op=recrawl_first), and a recrawl of the
unchanged site (op=recrawl: every page a 304, nothing parsed or emitted), each with its RESULT
and _dbcost lines as above, then
  RESULT system=crawlq op=recrawl_vs_full not_modified=… of_pages=… items_unchanged=…
    cpu_per_page_ratio=R total_cpu_per_page_ratio=T
the recrawl's CPU per page over crawl_always's: this process's (R) and with the server's (T).

--op crawl --render browser --url URL measures what a page rendered by headless Chromium costs,
on the script-drawn section of the demo site at URL (crawlq demo-site; docs/browser.md): the same
pages fetched plainly (op=crawl_plain, no items: scripts draw them) and with the item pages
rendered, 4 at once in one Chromium (op=crawl_browser, every item), each RESULT line adding
chromium_cpu_s (the Chromium processes') and all_cpu_s_per_1k_pages (this process's, Chromium's
and the crawl's Postgres backends'), then
  RESULT system=crawlq op=browser_vs_plain rendered=N ms_cpu_per_rendered_page=… ms_cpu_per_plain_page=… ratio=…
the CPU a rendered page adds over a fetched one. scripts/bench-browser.sh puts Puppeteer driving
the same Chromium beside it.

--op soak --url URL crawls the bench site again and again (a run after each other) with automatic
maintenance on, --pages pages in all, and prints every --every: pages/s, each crawlq table's and
index's size, dead tuples and the oldest open transaction (see docs/performance.md, "Storage over time").

--cpuprofile FILE writes a CPU profile of the whole command, --memprofile FILE the heap
allocations it made (read either with go tool pprof; -sample_index=alloc_objects for counts).`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			url := fs.String("database-url", "", "PostgreSQL URL (default $DATABASE_URL)")
			var cfg bench.Config
			fs.IntVar(&cfg.Jobs, "jobs", 100000, "jobs to insert and work")
			ops := fs.String("op", "insert,work", "what to measure: insert, work, unique (comma-separated), or crawl, recrawl, dbcost, soak")
			fs.IntVar(&cfg.Backlog, "backlog", 0, "extra delayed and finished jobs present during the work phase")
			fs.IntVar(&cfg.Workers, "workers", 2, "workers")
			fs.IntVar(&cfg.Concurrency, "concurrency", 128, "handlers per worker")
			fs.IntVar(&cfg.Batch, "batch", 5000, "claim, completion and insert batch size")
			fs.StringVar(&cfg.Schema, "schema", "crawlq_bench", "schema to work in (dropped and recreated)")
			site := fs.String("url", "", "with --op crawl: the bench site's base URL")
			render := fs.String("render", "", "with --op crawl: browser measures rendered pages on the demo site's script-drawn section at --url")
			fs.IntVar(&cfg.PoolConns, "pool-conns", 40, "with --op crawl or recrawl: database connections of the crawl's pool (a runner task without RDS Proxy has runner_db_connections)")
			quiet := fs.Bool("quiet", false, "no progress lines")
			var soak bench.SoakConfig
			fs.Int64Var(&soak.Pages, "pages", 0, "with --op soak: pages to crawl in all (default 1,000,000: about 10 minutes here)")
			fs.DurationVar(&soak.Every, "every", 0, "with --op soak: report interval (default 1m)")
			fs.DurationVar(&soak.Retention, "retention", 0, "with --op soak: the retention windows of succeeded jobs and finished runs' data (default 2m)")
			cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this file")
			memprofile := fs.String("memprofile", "", "write an allocation profile to this file when done")
			return func(ctx context.Context, args []string) (err error) {
				be, err := readBenchEnv(env, *url)
				if err != nil {
					return err
				}
				stop, err := startProfiles(*cpuprofile, *memprofile)
				if err != nil {
					return err
				}
				defer func() { err = errors.Join(err, stop()) }()
				cfg.URL = benchURL(be)
				cfg.Out = env.Stdout
				if !*quiet {
					cfg.Progress = env.Stderr
				}
				soak.Site = *site
				return benchTarget{op: *ops, site: *site, render: *render, soak: soak}.run(ctx, env, cfg)
			}
		},
	}
}

// startProfiles starts the CPU profile to cpu and readies the allocation profile to mem (either
// "": none); stop ends the one and writes the other.
func startProfiles(cpu, mem string) (stop func() error, err error) {
	stop = func() error { return nil }
	if cpu != "" {
		f, err := os.Create(cpu)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		stop = func() error {
			pprof.StopCPUProfile()
			return f.Close()
		}
	}
	if mem == "" {
		return stop, nil
	}
	stopCPU := stop
	return func() error { return errors.Join(stopCPU(), writeAllocs(mem)) }, nil
}

// benchURL is the database URL with the exec mode in it: the bench opens its pools from the URL
// (a schema of its own on each), so the mode that every other command takes from
// CRAWLQ_DB_EXEC_MODE goes into the URL.
func benchURL(be benchEnv) string {
	if be.ExecMode == "" {
		return be.URL
	}
	sep := "?"
	if strings.Contains(be.URL, "?") {
		sep = "&"
	}
	return be.URL + sep + "default_query_exec_mode=" + neturl.QueryEscape(be.ExecMode)
}

// benchTarget is what crawlq bench measures: --op, with the site (--url) and rendering
// (--render) the crawl measurements need.
type benchTarget struct {
	op, site, render string
	soak             bench.SoakConfig
}

// run measures t and prints its RESULT lines.
func (t benchTarget) run(ctx context.Context, env *Env, cfg bench.Config) error {
	switch t.op {
	case "dbcost":
		_, err := bench.QueueCost(ctx, cfg)
		return err
	case "soak":
		if t.site == "" {
			return usageErr("--op soak needs --url (the bench site, e.g. http://127.0.0.1:8089)")
		}
		_, err := bench.Soak(ctx, cfg, t.soak)
		return err
	case "recrawl":
		if t.site == "" {
			return usageErr("--op recrawl needs --url (the demo site: crawlq demo-site --items 10000 --addr 127.0.0.1:8090)")
		}
		_, err := bench.Recrawl(ctx, cfg, t.site)
		return err
	}
	if t.render != "" && (t.render != "browser" || t.op != "crawl") {
		return usageErr("--render %q: only --op crawl --render browser is measured", t.render)
	}
	if t.op == "crawl" {
		return t.crawl(ctx, cfg)
	}
	cfg.Ops = strings.Split(t.op, ",")
	return benchQueue(ctx, env, cfg)
}

// crawl measures a crawl of the bench site, or with --render browser the demo site's
// script-drawn section rendered beside fetched.
func (t benchTarget) crawl(ctx context.Context, cfg bench.Config) error {
	if t.render == "browser" {
		if t.site == "" {
			return usageErr("--op crawl --render browser needs --url (the demo site: crawlq demo-site --items 400 --addr 127.0.0.1:8091)")
		}
		_, err := bench.CrawlBrowser(ctx, cfg, t.site)
		return err
	}
	if t.site == "" {
		return usageErr("--op crawl needs --url (the bench site, e.g. http://127.0.0.1:8089)")
	}
	_, err := bench.Crawl(ctx, cfg, t.site)
	return err
}

// benchQueue measures the queue ops of cfg.Ops and prints a table of them after their RESULT
// lines.
func benchQueue(ctx context.Context, env *Env, cfg bench.Config) error {
	results, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintln(env.Stdout)
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "OP\tJOBS\tSECONDS\tJOBS/S\t")
	for _, r := range results {
		if strings.HasPrefix(r.Op, "claim_latency") {
			fmt.Fprintf(tw, "%s\t\t\t%s\t\n", r.Op, r.Extra)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.0f\t\n", r.Op, r.Jobs, r.Seconds, r.PerSec)
	}
	return tw.Flush()
}

// writeAllocs writes the allocations made so far as a pprof profile to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("memory profile: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("memory profile: %w", err)
	}
	return f.Close()
}
