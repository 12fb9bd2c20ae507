package bench

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/db"
	"crawlq/internal/migrate"
	"crawlq/internal/queue"
)

// The database cost of a unit of work (a crawled page, a queue job): what the server did for it,
// counted around the work, divided by the units.
//
//   - statements: pg_stat_statements' calls in this database when the extension is installed
//     (RDS has it; BEGIN and COMMIT count), else the statements the client sent;
//   - round trips: counted on the client by a pgx tracer (a query, a pipelined batch, a COPY);
//   - rows written: pg_stat_database's tup_inserted + tup_updated + tup_deleted;
//   - WAL bytes: pg_current_wal_lsn() after minus before (cluster-wide: autovacuum and anything
//     else writing meanwhile counts too);
//   - transactions: pg_stat_database's xact_commit + xact_rollback.
//
// The server's per-database counters reach pg_stat_database when a backend ends or idles, so the
// work's pool is closed, and its backends gone, before the second reading.

// appName marks the connections whose work is measured: this process's own, so a bench (or a
// bench test) running at the same time on the same server is neither waited for nor measured.
var appName = fmt.Sprintf("crawlq-bench-work-%d", os.Getpid())

// Counter is a pgx tracer counting round trips and statements.
type Counter struct {
	trips, stmts atomic.Int64
}

func (c *Counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.trips.Add(1)
	c.stmts.Add(1)
	return ctx
}
func (c *Counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *Counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.trips.Add(1)
	return ctx
}
func (c *Counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.stmts.Add(1)
}
func (c *Counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
func (c *Counter) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	c.trips.Add(1)
	c.stmts.Add(1)
	return ctx
}
func (c *Counter) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}
func (c *Counter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	c.trips.Add(1)
	return ctx
}
func (c *Counter) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

// openCounted opens the pool whose work is measured: cfg's database with search_path set to the
// bench schema, traced by counter.
func openCounted(ctx context.Context, cfg Config, maxConns int32, counter *Counter) (*pgxpool.Pool, error) {
	pc, err := db.Config{URL: cfg.URL + sep(cfg.URL) + "search_path=" + cfg.Schema, MaxConns: maxConns, AppName: appName}.PoolConfig()
	if err != nil {
		return nil, err
	}
	pc.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("bench: open pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("bench: connect: %w", err)
	}
	return pool, nil
}

// close releases the meter's connection (also after finish).
func (m *Meter) close() { m.admin.Close() }

// reading is the server's counters at one moment.
type reading struct {
	lsn                string
	xacts, rows        int64
	statements         int64 // -1 without pg_stat_statements
	trips, clientStmts int64
	dirtied            int64 // pg_stat_statements' shared blocks dirtied (-1 without it)
	schemaRows         int64 // rows written to the tables of the bench's schema alone
}

// Meter reads the counters before and after a piece of work.
type Meter struct {
	admin   *pgxpool.Pool // not measured: its own connection
	counter *Counter
	pss     string // schema-qualified pg_stat_statements, "" when not installed
	schema  string // the bench's schema
	before  reading
}

// startMeter takes the first reading.
func startMeter(ctx context.Context, cfg Config, counter *Counter) (*Meter, error) {
	admin, err := db.Open(ctx, db.Config{URL: cfg.URL, MaxConns: 1, AppName: "crawlq-bench-meter"})
	if err != nil {
		return nil, err
	}
	m := &Meter{admin: admin, counter: counter, schema: cfg.Schema}
	var schema *string
	if err := admin.QueryRow(ctx, `SELECT (SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_stat_statements')`).Scan(&schema); err != nil {
		admin.Close()
		return nil, fmt.Errorf("bench: look for pg_stat_statements: %w", err)
	}
	if schema != nil {
		// Installed is not loaded: reading the view fails without shared_preload_libraries.
		if _, err := admin.Exec(ctx, `SELECT 1 FROM `+pgx.Identifier{*schema, "pg_stat_statements"}.Sanitize()+` LIMIT 1`); err == nil {
			m.pss = pgx.Identifier{*schema, "pg_stat_statements"}.Sanitize()
		}
	}
	if m.before, err = m.read(ctx); err != nil {
		admin.Close()
		return nil, err
	}
	return m, nil
}

func (m *Meter) read(ctx context.Context) (reading, error) {
	r := reading{statements: -1, dirtied: -1}
	err := m.admin.QueryRow(ctx, `
SELECT pg_current_wal_lsn()::text, xact_commit + xact_rollback, tup_inserted + tup_updated + tup_deleted
FROM pg_stat_database WHERE datname = current_database()`).Scan(&r.lsn, &r.xacts, &r.rows)
	if err != nil {
		return r, fmt.Errorf("bench: read counters: %w", err)
	}
	// A table's TOAST rows count with it: a value over ~2 KB (a set of items) is written as rows
	// of its TOAST table, in schema pg_toast.
	err = m.admin.QueryRow(ctx, `
SELECT COALESCE(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint FROM pg_stat_all_tables
WHERE schemaname = $1
   OR relid IN (SELECT c.reltoastrelid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1)`,
		m.schema).Scan(&r.schemaRows)
	if err != nil {
		return r, fmt.Errorf("bench: read table counters: %w", err)
	}
	if m.pss != "" {
		err := m.admin.QueryRow(ctx, `SELECT COALESCE(sum(calls), 0)::bigint, COALESCE(sum(shared_blks_dirtied), 0)::bigint
FROM `+m.pss+` WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&r.statements, &r.dirtied)
		if err != nil {
			return r, fmt.Errorf("bench: read pg_stat_statements: %w", err)
		}
	}
	r.trips, r.clientStmts = m.counter.trips.Load(), m.counter.stmts.Load()
	return r, nil
}

// Cost is what the server did per unit of work.
type Cost struct {
	Units                        int64
	Statements, RoundTrips, Rows float64
	// SchemaRows is Rows counted on the bench schema's tables (and their TOAST tables) only: on
	// a database others write to meanwhile (a shared test server), Rows counts their writes too.
	SchemaRows             float64
	WALBytes, Transactions float64
	StatementSource        string  // "pg_stat_statements" or "client"
	ClientSentPer          float64 // statements as the client sent them
	// BlocksDirtied is the 8 KiB shared buffers the statements dirtied (each is written to disk
	// at least once, by a checkpoint or the background writer): an upper bound of the data-file
	// writes, -1 without pg_stat_statements.
	BlocksDirtied float64
}

// finish waits for the measured pool's backends to end (the pool must be closed), takes the
// second reading and returns the cost per unit. It closes the meter.
func (m *Meter) finish(ctx context.Context, units int64) (Cost, error) {
	defer m.admin.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var n int
		if err := m.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, appName).Scan(&n); err != nil {
			return Cost{}, fmt.Errorf("bench: wait for the work's connections to end: %w", err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return Cost{}, fmt.Errorf("bench: %d measured connections still open after 15s", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Backends report their counters as they exit; a fresh snapshot sees them.
	if _, err := m.admin.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return Cost{}, fmt.Errorf("bench: %w", err)
	}
	after, err := m.read(ctx)
	if err != nil {
		return Cost{}, err
	}
	var wal int64
	if err := m.admin.QueryRow(ctx, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint`, after.lsn, m.before.lsn).Scan(&wal); err != nil {
		return Cost{}, fmt.Errorf("bench: WAL difference: %w", err)
	}
	u := float64(max(units, 1))
	c := Cost{Units: units, RoundTrips: float64(after.trips-m.before.trips) / u, Rows: float64(after.rows-m.before.rows) / u,
		SchemaRows: float64(after.schemaRows-m.before.schemaRows) / u,
		WALBytes:   float64(wal) / u, Transactions: float64(after.xacts-m.before.xacts) / u,
		ClientSentPer: float64(after.clientStmts-m.before.clientStmts) / u, StatementSource: "client"}
	c.Statements, c.BlocksDirtied = c.ClientSentPer, -1
	if after.statements >= 0 && m.before.statements >= 0 {
		// The meter's own readings are a handful of statements in all; they are not subtracted.
		c.Statements = float64(after.statements-m.before.statements) / u
		c.BlocksDirtied = float64(after.dirtied-m.before.dirtied) / u
		c.StatementSource = "pg_stat_statements"
	}
	return c, nil
}

// line formats c as a RESULT line; unit names what was counted (pages, jobs).
func (c Cost) line(system, op, unit string) string {
	return fmt.Sprintf("RESULT system=%s op=%s %s=%d statements_per=%.3f round_trips_per=%.3f rows_written_per=%.2f wal_bytes_per=%.0f xacts_per=%.3f blocks_dirtied_per=%.3f statements_from=%s sent_per=%.3f schema_rows_written_per=%.2f",
		system, op, unit, c.Units, c.Statements, c.RoundTrips, c.Rows, c.WALBytes, c.Transactions, c.BlocksDirtied, c.StatementSource, c.ClientSentPer, c.SchemaRows)
}

// QueueCost measures the database cost per job of crawlq's queue the way River is measured by
// ../shared/bench/peers/run.sh (insert cfg.Jobs no-op jobs, then work them) and prints
//
//	RESULT system=crawlq op=queue_dbcost jobs=N statements_per=… round_trips_per=… rows_written_per=… wal_bytes_per=… xacts_per=…
//
// scripts/bench-dbcost.sh takes the same figures around River's run.
func QueueCost(ctx context.Context, cfg Config) (Cost, error) {
	cfg.defaults()
	if !validSchema(cfg.Schema) {
		return Cost{}, fmt.Errorf("bench: schema %q: want lower-case letters, digits and _", cfg.Schema)
	}
	if err := resetSchema(ctx, cfg); err != nil {
		return Cost{}, err
	}
	counter := &Counter{}
	pool, err := openCounted(ctx, cfg, int32(cfg.Workers*2+8), counter)
	if err != nil {
		return Cost{}, err
	}
	defer pool.Close()
	if _, err := migrate.Up(ctx, pool); err != nil {
		return Cost{}, err
	}
	m, err := startMeter(ctx, cfg, counter)
	if err != nil {
		return Cost{}, err
	}
	defer m.close()
	c := queue.New(pool, queue.Config{})
	if _, err := insert(ctx, c, cfg); err != nil {
		return Cost{}, err
	}
	if err := workAll(ctx, c, cfg); err != nil {
		return Cost{}, err
	}
	pool.Close()
	cost, err := m.finish(ctx, int64(cfg.Jobs))
	if err != nil {
		return Cost{}, err
	}
	fmt.Fprintln(cfg.Out, cost.line("crawlq", "queue_dbcost", "jobs"))
	return cost, nil
}

// workAll works the queue's cfg.Jobs jobs with the work phase's workers (as work does, without
// its latency probe afterwards, whose extra claims would count).
func workAll(ctx context.Context, c *queue.Client, cfg Config) error {
	var done atomic.Int64
	finished := make(chan struct{})
	h := func(context.Context, *queue.Job) error {
		if done.Add(1) == int64(cfg.Jobs) {
			close(finished)
		}
		return nil
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, cfg.Workers)
	for range cfg.Workers {
		w, err := queue.NewWorker(c, queue.WorkerConfig{Queue: "bench", Concurrency: cfg.Concurrency, BatchSize: cfg.Batch,
			CompleteBatch: cfg.Batch, PollInterval: 20 * time.Millisecond}, h)
		if err != nil {
			return err
		}
		go func() { errs <- w.Run(wctx) }()
	}
	select {
	case <-finished:
	case <-ctx.Done():
	}
	stop()
	for range cfg.Workers {
		<-errs
	}
	return ctx.Err()
}

// resetSchema drops and recreates the bench schema.
func resetSchema(ctx context.Context, cfg Config) error {
	admin, err := db.Open(ctx, db.Config{URL: cfg.URL, MaxConns: 2})
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+cfg.Schema+" CASCADE; CREATE SCHEMA "+cfg.Schema); err != nil {
		return fmt.Errorf("bench: reset schema: %w", err)
	}
	return nil
}
