// Package bench measures the queue the way ../shared/bench/peers/run.sh measures River and
// graphile-worker, and prints the same RESULT lines so the figures sit side by side:
//
//	RESULT system=crawlq op=insert|work|unique jobs=N seconds=S jobs_per_s=R
//	RESULT system=crawlq op=claim_latency backlog=M p50_ms=… p99_ms=…
//
// It works in a schema of its own (default crawlq_bench), emptied and migrated first, so it
// never touches real jobs in the same database.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/db"
	"crawlq/internal/migrate"
	"crawlq/internal/queue"
)

// Config describes a benchmark run.
type Config struct {
	URL    string // database URL
	Schema string // schema to work in; default crawlq_bench
	Jobs   int    // jobs to insert and work; default 100000
	// Backlog adds this many delayed and this many finished jobs before the work phase.
	Backlog int
	// Workers and Concurrency shape the work phase. Defaults 2 and 128.
	Workers, Concurrency int
	// Batch is the claim, completion and insert batch size. Default 5000, the batch River's
	// harness (../shared/bench/peers/river) inserts with.
	Batch int
	// PoolConns bounds the crawl's pool (--op crawl, recrawl): a runner task's database
	// connections. Default 40.
	PoolConns int
	// Ops selects what to run: "insert", "work", "unique" (any of them). Default insert and work.
	Ops      []string
	Out      io.Writer // RESULT lines and the summary
	Progress io.Writer // progress lines; nil for none
}

// Result is one figure.
type Result struct {
	Op      string
	Jobs    int
	Seconds float64
	PerSec  float64
	Extra   string
}

func (r Result) line() string {
	if strings.HasPrefix(r.Op, "claim_latency") {
		return "RESULT system=crawlq op=" + r.Op + " " + r.Extra
	}
	return fmt.Sprintf("RESULT system=crawlq op=%s jobs=%d seconds=%.3f jobs_per_s=%.0f", r.Op, r.Jobs, r.Seconds, r.PerSec)
}

func (c *Config) defaults() {
	if c.PoolConns <= 0 {
		c.PoolConns = 40
	}
	if c.Schema == "" {
		c.Schema = "crawlq_bench"
	}
	if c.Jobs <= 0 {
		c.Jobs = 100000
	}
	// The work defaults are crawlq's best settings on a 2-core machine (as run.sh gives each peer
	// its own): two workers, large claim and completion batches.
	if c.Workers <= 0 {
		c.Workers = 2
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 128
	}
	if c.Batch <= 0 {
		c.Batch = 5000
	}
	if len(c.Ops) == 0 {
		c.Ops = []string{"insert", "work"}
	}
}

// Run runs the benchmark and returns its results (also printed to Out).
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	cfg.defaults()
	if !validSchema(cfg.Schema) {
		return nil, fmt.Errorf("bench: schema %q: want lower-case letters, digits and _", cfg.Schema)
	}
	admin, err := db.Open(ctx, db.Config{URL: cfg.URL, MaxConns: 2})
	if err != nil {
		return nil, err
	}
	_, err = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+cfg.Schema+" CASCADE; CREATE SCHEMA "+cfg.Schema)
	admin.Close()
	if err != nil {
		return nil, fmt.Errorf("bench: reset schema: %w", err)
	}
	url := cfg.URL + sep(cfg.URL) + "search_path=" + cfg.Schema
	pool, err := db.Open(ctx, db.Config{URL: url, MaxConns: int32(cfg.Workers*2 + 8)})
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if _, err := migrate.Up(ctx, pool); err != nil {
		return nil, err
	}
	c := queue.New(pool, queue.Config{})
	var results []Result
	emit := func(r Result) {
		results = append(results, r)
		fmt.Fprintln(cfg.Out, r.line())
	}
	if cfg.Backlog > 0 {
		if err := backlog(ctx, pool, cfg); err != nil {
			return nil, err
		}
	}
	for _, op := range cfg.Ops {
		switch op {
		case "insert":
			r, err := insert(ctx, c, cfg)
			if err != nil {
				return results, err
			}
			emit(r)
		case "work":
			if !slices.Contains(cfg.Ops, "insert") {
				if _, err := insert(ctx, c, cfg); err != nil {
					return results, err
				}
			}
			r, lats, err := work(ctx, c, cfg)
			if err != nil {
				return results, err
			}
			emit(r)
			for _, l := range lats {
				if l.Op != "" {
					emit(l)
				}
			}
		case "unique":
			r, err := unique(ctx, c, pool, cfg)
			if err != nil {
				return results, err
			}
			emit(r)
		default:
			return results, fmt.Errorf("bench: unknown op %q (want insert, work, unique)", op)
		}
	}
	return results, nil
}

func validSchema(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

func sep(url string) string {
	for _, c := range url {
		if c == '?' {
			return "&"
		}
	}
	return "?"
}

func params(n, offset int, queueName string) []queue.EnqueueParams {
	ps := make([]queue.EnqueueParams, n)
	for i := range ps {
		ps[i] = queue.EnqueueParams{Queue: queueName, Kind: "noop", Args: json.RawMessage(`{"n":` + strconv.Itoa(offset+i) + `}`)}
	}
	return ps
}

// insert enqueues cfg.Jobs jobs in batches from two connections at once.
func insert(ctx context.Context, c *queue.Client, cfg Config) (Result, error) {
	return timed(cfg, "insert", cfg.Jobs, func(from, n int) (int, error) {
		_, err := c.EnqueueMany(ctx, params(n, from, "bench"))
		return n, err
	})
}

// timed times op: [0, span) is split between two concurrent streams (connections), each going
// through its part in batches of cfg.Batch with do, which returns how many jobs it enqueued.
func timed(cfg Config, op string, span int, do func(from, n int) (int, error)) (Result, error) {
	const streams = 2
	per := (span + streams - 1) / streams
	var done atomic.Int64
	stopProgress := progress(cfg, op, &done, cfg.Jobs)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			end := min((s+1)*per, span)
			for i := s * per; i < end; i += cfg.Batch {
				k, err := do(i, min(cfg.Batch, end-i))
				if err != nil {
					errs <- err
					return
				}
				done.Add(int64(k))
			}
		}()
	}
	wg.Wait()
	stopProgress()
	el := time.Since(start).Seconds()
	select {
	case err := <-errs:
		return Result{}, err
	default:
	}
	return Result{Op: op, Jobs: cfg.Jobs, Seconds: el, PerSec: float64(cfg.Jobs) / el}, nil
}

// work burns the queue down with workers in this process and times it, then measures claim
// latency on the idle queue (with the backlog, if any, still there).
func work(ctx context.Context, c *queue.Client, cfg Config) (Result, []Result, error) {
	var done atomic.Int64
	target := int64(cfg.Jobs)
	finished := make(chan struct{})
	var once sync.Once
	h := func(context.Context, *queue.Job) error {
		if done.Add(1) >= target {
			once.Do(func() { close(finished) })
		}
		return nil
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	start := time.Now()
	stopProgress := progress(cfg, "work", &done, cfg.Jobs)
	for range cfg.Workers {
		w, err := queue.NewWorker(c, queue.WorkerConfig{Queue: "bench", Concurrency: cfg.Concurrency, BatchSize: cfg.Batch,
			CompleteBatch: cfg.Batch, PollInterval: 20 * time.Millisecond}, h)
		if err != nil {
			return Result{}, nil, err
		}
		wg.Add(1)
		go func() { defer wg.Done(); w.Run(wctx) }()
	}
	select {
	case <-finished:
	case <-ctx.Done():
		return Result{}, nil, ctx.Err()
	}
	el := time.Since(start).Seconds()
	stopProgress()
	stop()
	wg.Wait()
	r := Result{Op: "work", Jobs: cfg.Jobs, Seconds: el, PerSec: float64(cfg.Jobs) / el}
	idle, err := idleLatency(ctx, c, cfg)
	if err != nil {
		return r, nil, err
	}
	return r, []Result{idle}, nil
}

// latency summarises samples as a claim_latency result.
func latency(backlog int, lat []time.Duration) Result {
	if len(lat) == 0 {
		return Result{}
	}
	slices.Sort(lat)
	p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
	return Result{Op: "claim_latency", Extra: fmt.Sprintf("backlog=%d p50_ms=%.2f p99_ms=%.2f samples=%d", backlog, p(0.5), p(0.99), len(lat))}
}

// idleLatency times 1000 one-job claims, one after another, on a queue holding 2000 due jobs
// beside the backlog, with nothing else running: what the backlog alone costs a claim.
func idleLatency(ctx context.Context, c *queue.Client, cfg Config) (Result, error) {
	if _, err := c.EnqueueMany(ctx, params(2000, 0, "bench")); err != nil {
		return Result{}, err
	}
	lat := make([]time.Duration, 0, 1000)
	for range 1000 {
		t0 := time.Now()
		jobs, err := c.Claim(ctx, queue.ClaimParams{Queue: "bench", Worker: "probe", Limit: 1, Lease: time.Minute})
		if err != nil {
			return Result{}, err
		}
		lat = append(lat, time.Since(t0))
		for _, j := range jobs {
			if err := c.Complete(ctx, j.Lease()); err != nil {
				return Result{}, err
			}
		}
	}
	return latency(cfg.Backlog, lat), nil
}

// unique enqueues cfg.Jobs jobs with unique keys in replace mode, half of them repeating a key
// already present.
func unique(ctx context.Context, c *queue.Client, pool *pgxpool.Pool, cfg Config) (Result, error) {
	if _, err := pool.Exec(ctx, `DELETE FROM crawlq_job WHERE queue = 'unique'`); err != nil {
		return Result{}, err
	}
	half := cfg.Jobs / 2
	mk := func(from, n int) []queue.EnqueueParams {
		ps := params(n, from, "unique")
		for i := range ps {
			ps[i].UniqueKey = "k" + strconv.Itoa((from+i)%half)
			ps[i].OnDuplicate = queue.Replace
			ps[i].Delay = time.Hour
		}
		return ps
	}
	// Each stream owns its own keys (from and from+half), so the two never wait on each other's rows.
	return timed(cfg, "unique", half, func(from, n int) (int, error) {
		for _, f := range []int{from, from + half} {
			if _, err := c.EnqueueMany(ctx, mk(f, n)); err != nil {
				return 0, err
			}
		}
		return 2 * n, nil
	})
}

// backlog adds cfg.Backlog delayed and cfg.Backlog finished jobs to the bench queue, in bulk SQL
// (the figure measured is the work with them present, not their insertion).
func backlog(ctx context.Context, pool *pgxpool.Pool, cfg Config) error {
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "adding a backlog of %d delayed and %d finished jobs...\n", cfg.Backlog, cfg.Backlog)
	}
	const chunk = 500000
	for done := 0; done < cfg.Backlog; done += chunk {
		n := min(chunk, cfg.Backlog-done)
		if _, err := pool.Exec(ctx, `
INSERT INTO crawlq_job (queue, kind, state, run_at, args, finished_at)
SELECT 'bench', 'noop', s.state::crawlq_job_state, now() + interval '1 day', jsonb_build_object('n', g),
       CASE WHEN s.state = 'succeeded' THEN now() END
FROM generate_series(1, $1::int) g, (VALUES ('scheduled'), ('succeeded')) s(state)`, n); err != nil {
			return fmt.Errorf("bench: backlog: %w", err)
		}
		// Rows inserted behind the queue's back: record them in its counts as it would.
		if _, err := pool.Exec(ctx, `INSERT INTO crawlq_job_count_delta (queue, state, n)
VALUES ('bench', 'scheduled', $1), ('bench', 'succeeded', $1)`, n); err != nil {
			return fmt.Errorf("bench: backlog counts: %w", err)
		}
	}
	_, err := pool.Exec(ctx, `VACUUM ANALYZE crawlq_job`)
	return err
}

// progress prints a progress line every second until the returned function is called.
func progress(cfg Config, op string, done *atomic.Int64, total int) func() {
	if cfg.Progress == nil {
		return func() {}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	start := time.Now()
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				d := done.Load()
				fmt.Fprintf(cfg.Progress, "  %s: %d/%d (%.0f jobs/s)\n", op, d, total, float64(d)/time.Since(start).Seconds())
			}
		}
	}()
	return func() { close(stop); wg.Wait() }
}
