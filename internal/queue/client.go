package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/backoff"
	"crawlq/internal/clock"
	"crawlq/internal/dbsqlc"
)

// The Client's methods are grouped by what they do, one file per group, each running the
// statements of internal/dbsqlc/crawlq_job*.sql and crawlq_worker.sql:
//
//   - enqueue.go: adding jobs (unique keys, once keys, COPY).
//   - lease.go: what a worker does with jobs it holds (claim, heartbeat, complete, fail, snooze,
//     release, cancel).
//   - tx.go: a worker's completions, new jobs and statements of its own in one transaction sent in
//     one round trip.
//   - admin.go: an operator's reads and changes (get, list, cancel, redrive).
//   - maintenance.go: promotion, rescue, retention, purges, recount, worker pruning.
//   - stats.go: counts per queue and live workers.
//
// The Worker, which claims and runs jobs through these calls, is in worker*.go (worker.go lists
// its parts); reserve.go is how a process hands jobs it inserts to its own worker.

// DB is what the client needs from a pool or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Config tunes a Client. The zero value is valid.
type Config struct {
	// RetryBase is the delay before the first retry; each further attempt doubles it. Default 1s.
	RetryBase time.Duration
	// RetryMax caps the retry delay. Default 1h.
	RetryMax time.Duration
	// Clock is the time the statements act at (leases, run times, rescue, retention). Default
	// nil: the database's now() in each statement, so that workers with skewed clocks agree (and
	// the wall clock where the client itself needs the time of day). Tests set a stopped clock
	// and move it instead of sleeping.
	Clock clock.Clock
}

func (c Config) withDefaults() Config {
	if c.RetryBase <= 0 {
		c.RetryBase = time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = time.Hour
	}
	return c
}

// Client talks to the queue tables through a pool.
type Client struct {
	pool *pgxpool.Pool
	cfg  Config
	q    *dbsqlc.Queries // on pool
}

// New returns a client on pool.
func New(pool *pgxpool.Pool, cfg Config) *Client {
	return &Client{pool: pool, cfg: cfg.withDefaults(), q: dbsqlc.New(pool)}
}

// Pool returns the client's pool.
func (c *Client) Pool() *pgxpool.Pool { return c.pool }

// now is the time a statement acts at: nil for the database's clock.
func (c *Client) now() *time.Time {
	if c.cfg.Clock == nil {
		return nil
	}
	t := c.cfg.Clock.Now()
	return &t
}

// localNow is the time of day where the client itself needs it: the Clock's, or else the wall
// clock, which stands in for the database's.
func (c *Client) localNow() time.Time { return clock.Or(c.cfg.Clock).Now() }

// Backoff returns the delay before retrying after failed attempt number attempt (1-based):
// exponential from RetryBase, capped at RetryMax, with "equal jitter" (half fixed, half random)
// so that jobs failing together do not retry together.
func (c *Client) Backoff(attempt int) time.Duration {
	return backoff.Policy{Base: c.cfg.RetryBase, Max: c.cfg.RetryMax, Jitter: true}.Delay(max(attempt, 1))
}

// jobFromRow is the one conversion from a job row to a Job. The statements that return whole
// jobs return every column of crawlq_job (j.*, or a function returning SETOF crawlq_job), so sqlc
// gives them all dbsqlc.CrawlqJob rows.
func jobFromRow(r dbsqlc.CrawlqJob) (*Job, error) {
	j := &Job{ID: r.ID, Queue: r.Queue, Kind: r.Kind, State: State(r.State), Args: r.Args, Priority: int(r.Priority),
		RunAt: r.RunAt, Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts), LeaseUntil: r.LeaseUntil,
		LeaseToken: r.LeaseToken.Int64, Worker: r.Worker.String, UniqueKey: r.UniqueKey.String, ParentID: r.ParentID.Int64,
		CancelRequested: r.CancelRequested, CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt}
	if len(r.Errors) > 0 {
		if err := json.Unmarshal(r.Errors, &j.Errors); err != nil {
			return nil, fmt.Errorf("job %d errors: %w", j.ID, err)
		}
	}
	return j, nil
}

// jobsFromRows converts rows of whole jobs (see jobFromRow).
func jobsFromRows(rows []dbsqlc.CrawlqJob) ([]*Job, error) {
	jobs := make([]*Job, len(rows))
	for i, r := range rows {
		j, err := jobFromRow(r)
		if err != nil {
			return nil, err
		}
		jobs[i] = j
	}
	return jobs, nil
}
