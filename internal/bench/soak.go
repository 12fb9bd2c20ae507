package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/crawl"
	"crawlq/internal/db"
	"crawlq/internal/fetch"
	"crawlq/internal/maintain"
	"crawlq/internal/migrate"
	"crawlq/internal/node"
	"crawlq/internal/queue"
)

// SoakConfig describes a soak: crawl runs of the bench site, one after the other, with automatic
// maintenance on, until Pages pages were crawled.
type SoakConfig struct {
	// Site is the bench site's base URL (../shared/bench/site, or any site Spider crawls).
	Site string
	// Spider crawls Site. Default "benchsite".
	Spider string
	// Pages to crawl in all. Default 1,000,000 (about 10 minutes on this project's shared machine).
	Pages int64
	// Every is the report interval. Default 1m.
	Every time.Duration
	// Retention is every maintenance window the soak shortens (succeeded and cancelled jobs, the
	// data of finished runs), so that retention starts within the soak. Default 2m.
	Retention time.Duration
	// Maintain overrides the maintenance settings beyond Retention (its windows are set from
	// Retention when zero; Interval defaults to 10s here).
	Maintain maintain.Config
	// Report, when set, receives each report (tests); they are printed to Config.Out either way.
	Report func(SoakReport)
}

// TableSize is one crawlq table at a moment.
type TableSize struct {
	Name              string
	Heap, Index       int64 // bytes (heap with its TOAST)
	Live, Dead        int64 // tuples, as the statistics collector last counted them
	Vacuums           int64 // autovacuum runs so far
	LastAutovacuumAgo time.Duration
}

// SoakReport is one report line.
type SoakReport struct {
	Elapsed     time.Duration
	Pages       int64   // crawled so far
	PagesPerSec float64 // in the interval since the previous report
	Runs        int     // runs finished so far
	Tables      []TableSize
	Total       int64 // bytes of every crawlq table and index
	// Queue is Total without crawlq_item_set: the items are what a crawl is for and stay until their
	// runs are deleted; everything else is what maintenance must keep bounded.
	Queue      int64
	OldestXact time.Duration // the oldest open transaction in the cluster (0: none)
	// WALPerPage is the WAL written in the interval (cluster-wide: the crawl, maintenance,
	// autovacuum, checkpoints' full-page images) per page crawled in it.
	WALPerPage  float64
	lsn         string
	Maintenance maintain.Result
}

func (c *SoakConfig) defaults() {
	if c.Spider == "" {
		c.Spider = "benchsite"
	}
	if c.Pages <= 0 {
		c.Pages = 1_000_000
	}
	if c.Every <= 0 {
		c.Every = time.Minute
	}
	if c.Retention <= 0 {
		c.Retention = 2 * time.Minute
	}
	m := &c.Maintain
	for _, d := range []*time.Duration{&m.Succeeded, &m.Cancelled, &m.RunData} {
		if *d == 0 {
			*d = c.Retention
		}
	}
	if m.Interval == 0 {
		m.Interval = 10 * time.Second
	}
}

// Soak runs the soak and returns its reports; the last one is taken after the runs stopped and
// one more maintenance pass ran.
func Soak(ctx context.Context, cfg Config, sc SoakConfig) ([]SoakReport, error) {
	cfg.defaults()
	sc.defaults()
	if !validSchema(cfg.Schema) {
		return nil, fmt.Errorf("bench: schema %q: want lower-case letters, digits and _", cfg.Schema)
	}
	if err := resetSchema(ctx, cfg); err != nil {
		return nil, err
	}
	pool, err := db.Open(ctx, db.Config{URL: cfg.URL + sep(cfg.URL) + "search_path=" + cfg.Schema, MaxConns: 40})
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if _, err := migrate.Up(ctx, pool); err != nil {
		return nil, err
	}
	finished := make(chan int64, 1)
	mc := sc.Maintain
	n, err := node.New(node.Config{Pool: pool, Workers: cfg.Workers, Maintain: &mc,
		Fetch:    fetch.Config{AllowLoopback: true}, // the soak's site is served on loopback
		Worker:   queue.WorkerConfig{Concurrency: cfg.Concurrency, BatchSize: cfg.Concurrency * 2},
		OnFinish: func(id int64, _ string) { finished <- id }})
	if err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.Run(wctx) }()
	halted := false
	halt := func() {
		if !halted {
			halted = true
			stop()
			<-done
		}
	}
	defer halt()

	var pages atomic.Int64 // of finished runs
	var cur atomic.Int64   // the run going on
	runs := 0
	start := time.Now()
	var reports []SoakReport
	report := func(last *SoakReport, res maintain.Result) error {
		r, err := measure(ctx, pool, cfg.Schema)
		if err != nil {
			return err
		}
		r.Elapsed, r.Pages, r.Runs, r.Maintenance = time.Since(start), pages.Load(), runs, res
		if id := cur.Load(); id != 0 {
			run, err := n.Crawler.Get(ctx, id)
			if err != nil {
				return err
			}
			if !run.Finished() {
				r.Pages += run.Stats.Pages // so far
			}
		}
		prevT, prevP := time.Duration(0), int64(0)
		if last != nil {
			prevT, prevP = last.Elapsed, last.Pages
		}
		if dt := (r.Elapsed - prevT).Seconds(); dt > 0 {
			r.PagesPerSec = float64(r.Pages-prevP) / dt
		}
		if last != nil && r.Pages > prevP {
			var wal int64
			if err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint`, r.lsn, last.lsn).Scan(&wal); err != nil {
				return fmt.Errorf("soak: WAL: %w", err)
			}
			r.WALPerPage = float64(wal) / float64(r.Pages-prevP)
		}
		reports = append(reports, r)
		printSoak(cfg.Out, r)
		if sc.Report != nil {
			sc.Report(r)
		}
		return nil
	}
	if err := report(nil, maintain.Result{}); err != nil {
		return reports, err
	}
	tick := time.NewTicker(sc.Every)
	defer tick.Stop()
	schedule := func() (int64, error) {
		s, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: sc.Spider, Args: map[string]string{"base_url": sc.Site}})
		cur.Store(s.RunID)
		return s.RunID, err
	}
	id, err := schedule()
	if err != nil {
		return reports, err
	}
	for pages.Load() < sc.Pages {
		select {
		case <-ctx.Done():
			return reports, ctx.Err()
		case got := <-finished:
			if got != id {
				continue
			}
			r, err := n.Crawler.Get(ctx, id)
			if err != nil {
				return reports, err
			}
			if r.State != "succeeded" || r.Stats.Pages == 0 {
				return reports, fmt.Errorf("soak: run %d ended %s with %d pages (%s)", id, r.State, r.Stats.Pages, r.Error)
			}
			pages.Add(r.Stats.Pages)
			runs++
			cur.Store(0)
			if pages.Load() < sc.Pages {
				if id, err = schedule(); err != nil {
					return reports, err
				}
			}
		case <-tick.C:
			if err := report(&reports[len(reports)-1], maintain.Result{}); err != nil {
				return reports, err
			}
		}
	}
	el := time.Since(start)
	halt()
	// One more pass now that nothing runs: what the last windows' worth leaves.
	svc, err := maintain.New(n.Queue, n.Crawler, mc)
	if err != nil {
		return reports, err
	}
	if _, err := pool.Exec(ctx, `DELETE FROM crawlq_leader`); err != nil { // the node's last pass set next_at
		return reports, err
	}
	res, err := svc.RunOnce(ctx, mc.WithDefaults().Clock.Now())
	if err != nil {
		return reports, err
	}
	if err := report(&reports[len(reports)-1], res); err != nil {
		return reports, err
	}
	first, peak := firstRate(reports), int64(0)
	for _, r := range reports {
		if r.Queue > peak {
			peak = r.Queue
		}
	}
	fmt.Fprintf(cfg.Out, "RESULT system=crawlq op=soak pages=%d runs=%d seconds=%.0f pages_per_s=%.0f first_interval_pages_per_s=%.0f last_interval_pages_per_s=%.0f peak_without_items_mb=%.1f final_without_items_mb=%.1f final_total_mb=%.1f\n",
		pages.Load(), runs, el.Seconds(), float64(pages.Load())/el.Seconds(), first, lastRate(reports), mb(peak), mb(reports[len(reports)-1].Queue), mb(reports[len(reports)-1].Total))
	return reports, nil
}

// firstRate is the pages/s of the first full interval; lastRate of the last one before the end.
func firstRate(rs []SoakReport) float64 {
	if len(rs) > 1 {
		return rs[1].PagesPerSec
	}
	return 0
}

func lastRate(rs []SoakReport) float64 {
	if len(rs) > 2 {
		return rs[len(rs)-2].PagesPerSec
	}
	return firstRate(rs)
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// measure reads the size of every table in schema and the oldest open transaction.
func measure(ctx context.Context, pool *pgxpool.Pool, schema string) (SoakReport, error) {
	var r SoakReport
	rows, err := pool.Query(ctx, `
SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid), COALESCE(s.n_live_tup, 0), COALESCE(s.n_dead_tup, 0),
       COALESCE(s.autovacuum_count, 0), COALESCE(now() - s.last_autovacuum, '0')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE n.nspname = $1 AND c.relkind = 'r'
ORDER BY c.relname`, schema)
	if err != nil {
		return r, fmt.Errorf("soak: table sizes: %w", err)
	}
	for rows.Next() {
		var t TableSize
		if err := rows.Scan(&t.Name, &t.Heap, &t.Index, &t.Live, &t.Dead, &t.Vacuums, &t.LastAutovacuumAgo); err != nil {
			rows.Close()
			return r, fmt.Errorf("soak: table sizes: %w", err)
		}
		r.Tables = append(r.Tables, t)
		r.Total += t.Heap + t.Index
		if t.Name != "crawlq_item_set" {
			r.Queue += t.Heap + t.Index
		}
	}
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("soak: table sizes: %w", err)
	}
	err = pool.QueryRow(ctx, `SELECT GREATEST(COALESCE(max(now() - xact_start), '0'), '0'), pg_current_wal_lsn()::text FROM pg_stat_activity
WHERE xact_start IS NOT NULL AND pid <> pg_backend_pid()`).Scan(&r.OldestXact, &r.lsn)
	if err != nil {
		return r, fmt.Errorf("soak: oldest transaction: %w", err)
	}
	return r, nil
}

func printSoak(w io.Writer, r SoakReport) {
	fmt.Fprintf(w, "SOAK t=%.0fs pages=%d runs=%d pages_per_s=%.0f total_mb=%.1f without_items_mb=%.1f oldest_xact_s=%.2f wal_bytes_per_page=%.0f",
		r.Elapsed.Seconds(), r.Pages, r.Runs, r.PagesPerSec, mb(r.Total), mb(r.Queue), r.OldestXact.Seconds(), r.WALPerPage)
	if r.Maintenance.Ran {
		fmt.Fprintf(w, " (final maintenance pass: %d jobs, %d once keys, %d runs purged)", r.Maintenance.Jobs, r.Maintenance.OnceKeys, r.Maintenance.Runs)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  table\theap MB\tindex MB\tlive\tdead\tautovacuums\t")
	for _, t := range r.Tables {
		if t.Heap+t.Index < 64<<10 {
			continue
		}
		fmt.Fprintf(tw, "  %s\t%.1f\t%.1f\t%d\t%d\t%d\t\n", strings.TrimPrefix(t.Name, "crawlq_"), mb(t.Heap), mb(t.Index), t.Live, t.Dead, t.Vacuums)
	}
	tw.Flush()
}
