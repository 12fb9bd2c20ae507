package queue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"crawlq/internal/dbsqlc"
)

// Keeping the queue healthy: promotion of delayed jobs, rescue of expired leases, deletion of
// finished jobs (the operator's Retention; internal/maintain's PurgeFinished and DeleteOnceKeys),
// the recount of the state counts, and forgetting dead workers.

// Promote makes up to limit delayed jobs that are now due available, and returns how many.
func (c *Client) Promote(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		limit = 1000
	}
	n, err := c.q.PromoteJobs(ctx, dbsqlc.PromoteJobsParams{Now: c.now(), MaxJobs: int32(min(limit, math.MaxInt32))})
	if err != nil {
		return 0, fmt.Errorf("promote: %w", err)
	}
	return int(n), nil
}

// Rescue returns up to limit jobs whose lease expired to available (or dead when out of attempts,
// or cancelled when asked) and returns how many it rescued. Each keeps the last maxKeptErrors
// entries of its error history, the expiry among them.
func (c *Client) Rescue(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		limit = 1000
	}
	n, err := c.q.RescueJobs(ctx, dbsqlc.RescueJobsParams{Now: c.now(), MaxJobs: int32(min(limit, math.MaxInt32)), KeptErrors: maxKeptErrors})
	if err != nil {
		return 0, fmt.Errorf("rescue: %w", err)
	}
	return int(n), nil
}

// RetentionParams says which finished jobs to delete. At least one of MaxAge and KeepPerQueue must be set.
type RetentionParams struct {
	// MaxAge deletes jobs finished longer ago than this. Zero: no age limit.
	MaxAge time.Duration
	// KeepPerQueue deletes all but the newest N finished jobs of each queue. Zero: no count limit.
	KeepPerQueue int
	// States limits deletion to these finished states. Default all three.
	States []State
	// BatchSize rows are deleted per statement, so no statement holds many locks. Default 5000.
	BatchSize int
	// MaxBatches bounds the work of one call. Default 100.
	MaxBatches int
}

// Retention deletes finished jobs in bounded batches and returns how many it deleted.
func (c *Client) Retention(ctx context.Context, p RetentionParams) (int64, error) {
	if p.MaxAge < 0 || p.KeepPerQueue < 0 {
		return 0, fmt.Errorf("%w: retention: max age and keep must not be negative", ErrInvalid)
	}
	if p.MaxAge == 0 && p.KeepPerQueue == 0 {
		return 0, fmt.Errorf("%w: retention: set a max age, a number to keep, or both", ErrInvalid)
	}
	if p.KeepPerQueue > math.MaxInt32 || p.BatchSize > math.MaxInt32 {
		return 0, fmt.Errorf("%w: retention: keep and batch size must fit 32 bits", ErrInvalid)
	}
	states := []string{}
	for _, s := range p.States {
		if !s.Finished() {
			return 0, fmt.Errorf("%w: retention: state %q is not a finished state", ErrInvalid, s)
		}
		states = append(states, string(s))
	}
	if len(states) == 0 {
		states = []string{string(StateSucceeded), string(StateCancelled), string(StateDead)}
	}
	if p.BatchSize <= 0 {
		p.BatchSize = 5000
	}
	if p.MaxBatches <= 0 {
		p.MaxBatches = 100
	}
	var total int64
	batches := 0
	run := func(batch func() (int64, error)) error {
		for batches < p.MaxBatches {
			batches++
			n, err := batch()
			if err != nil {
				return fmt.Errorf("retention: %w", err)
			}
			total += n
			if n < int64(p.BatchSize) {
				return nil
			}
		}
		return nil
	}
	if p.MaxAge > 0 {
		arg := dbsqlc.DeleteFinishedJobsByAgeParams{States: states, Now: c.now(), AgeUs: p.MaxAge.Microseconds(), MaxJobs: int32(p.BatchSize)}
		if err := run(func() (int64, error) { return c.q.DeleteFinishedJobsByAge(ctx, arg) }); err != nil {
			return total, err
		}
	}
	if p.KeepPerQueue > 0 {
		queues, err := c.queues(ctx)
		if err != nil {
			return total, err
		}
		for _, q := range queues {
			arg := dbsqlc.DeleteFinishedJobsBeyondParams{Queue: q, States: states, Keep: int32(p.KeepPerQueue), MaxJobs: int32(p.BatchSize)}
			if err := run(func() (int64, error) { return c.q.DeleteFinishedJobsBeyond(ctx, arg) }); err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// Purging is retention done by internal/maintain on a schedule, as opposed to the operator's
// Retention: per queue through crawlq_job_finished, one bounded batch per call, with explicit
// cutoffs so the caller (and its tests) own the clock.

// Cutoffs say which finished jobs may go: those that finished before the cutoff of their state.
// A zero time keeps every job of that state.
type Cutoffs struct {
	Succeeded, Cancelled, Dead time.Time
}

// never is a cutoff no finished_at is before ('-infinity' would need a special pgx encoding).
var never = time.Unix(0, 0).UTC().AddDate(-1000, 0, 0)

func cutoff(t time.Time) time.Time {
	if t.IsZero() {
		return never
	}
	return t
}

// PurgeFinished deletes up to limit finished jobs of queue q that finished before their state's
// cutoff, oldest first, and returns how many it deleted. Jobs locked by someone else are skipped.
func (c *Client) PurgeFinished(ctx context.Context, q string, cut Cutoffs, limit int) (int, error) {
	if limit <= 0 || limit > math.MaxInt32 {
		return 0, fmt.Errorf("%w: purge: limit %d", ErrInvalid, limit)
	}
	n, err := c.q.PurgeFinishedJobs(ctx, dbsqlc.PurgeFinishedJobsParams{Queue: q, SucceededBefore: cutoff(cut.Succeeded),
		CancelledBefore: cutoff(cut.Cancelled), DeadBefore: cutoff(cut.Dead), MaxJobs: int32(limit)})
	if err != nil {
		return 0, fmt.Errorf("purge finished jobs of %s: %w", q, err)
	}
	return int(n), nil
}

// DeleteOnceKeys deletes up to limit once keys of parent after key `after` (the zero key to
// start), with the finished jobs that carry them (retention leaves those to it), but only while the parent is settled: it has no unfinished job and no dead job (which a
// redrive could bring back, and whose pages would then find and enqueue again URLs the parent
// already fetched). It returns how many it deleted and the key to go on after; 0 with a parent
// that is not settled.
func (c *Client) DeleteOnceKeys(ctx context.Context, parent int64, after [16]byte, limit int) (int, [16]byte, error) {
	if limit <= 0 || limit > math.MaxInt32 {
		return 0, after, fmt.Errorf("%w: delete once keys: limit %d", ErrInvalid, limit)
	}
	r, err := c.q.DeleteOnceKeys(ctx, dbsqlc.DeleteOnceKeysParams{ParentID: parent, After: pgtype.UUID{Bytes: after, Valid: true}, MaxKeys: int32(limit)})
	if err != nil {
		return 0, after, fmt.Errorf("delete once keys of %d: %w", parent, err)
	}
	return int(r.Deleted), r.Last.Bytes, nil
}

// Settled reports whether parent has no unfinished and no dead job (see DeleteOnceKeys).
func (c *Client) Settled(ctx context.Context, parent int64) (bool, error) {
	ok, err := c.q.ParentSettled(ctx, parent)
	if err != nil {
		return false, fmt.Errorf("check jobs of %d: %w", parent, err)
	}
	return ok, nil
}

// Recount rebuilds the per-queue state counts from the job rows. Stats never need it; it repairs
// the counts after job rows were changed by SQL outside this package. It reads every job row, in
// one REPEATABLE READ transaction: with one snapshot, a count change committed meanwhile is either
// counted in the rows and deleted, or neither.
func (c *Client) Recount(ctx context.Context) error {
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		if err := q.RecountClearDeltas(ctx); err != nil {
			return err
		}
		if err := q.RecountClearTotals(ctx); err != nil {
			return err
		}
		return q.RecountFromJobs(ctx)
	})
	if err != nil {
		return fmt.Errorf("recount: %w", err)
	}
	return nil
}

// PruneWorkers forgets workers not seen within horizon (they died without unregistering).
func (c *Client) PruneWorkers(ctx context.Context, horizon time.Duration) (int, error) {
	n, err := c.q.PruneWorkers(ctx, dbsqlc.PruneWorkersParams{Now: c.now(), HorizonUs: horizon.Microseconds()})
	if err != nil {
		return 0, fmt.Errorf("prune workers: %w", err)
	}
	return int(n), nil
}

// NextScheduled returns when the soonest delayed job (a delayed enqueue, a snooze, a retry's
// backoff) comes due, and false when none waits.
func (c *Client) NextScheduled(ctx context.Context) (time.Time, bool, error) {
	at, err := c.q.NextScheduledAt(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next scheduled job: %w", err)
	}
	return at, true, nil
}
