package queue

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

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
	var n int
	err := c.pool.QueryRow(ctx, sqlPurgeFinished, q, cutoff(cut.Succeeded), cutoff(cut.Cancelled), cutoff(cut.Dead), limit).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("purge finished jobs of %s: %w", q, err)
	}
	return n, nil
}

// DeleteOnceKeys deletes up to limit once keys of parent after key `after` (the zero key to
// start), but only while the parent is settled: it has no unfinished job and no dead job (which a
// redrive could bring back, and whose pages would then find and enqueue again URLs the parent
// already fetched). It returns how many it deleted and the key to go on after; 0 with a parent
// that is not settled.
func (c *Client) DeleteOnceKeys(ctx context.Context, parent int64, after [16]byte, limit int) (int, [16]byte, error) {
	if limit <= 0 || limit > math.MaxInt32 {
		return 0, after, fmt.Errorf("%w: delete once keys: limit %d", ErrInvalid, limit)
	}
	var n int
	var last pgtype.UUID
	if err := c.pool.QueryRow(ctx, sqlDeleteOnceKeys, parent, limit, pgtype.UUID{Bytes: after, Valid: true}).Scan(&n, &last); err != nil {
		return 0, after, fmt.Errorf("delete once keys of %d: %w", parent, err)
	}
	return n, last.Bytes, nil
}

// Settled reports whether parent has no unfinished and no dead job (see DeleteOnceKeys).
func (c *Client) Settled(ctx context.Context, parent int64) (bool, error) {
	var ok bool
	if err := c.pool.QueryRow(ctx, sqlParentSettled, parent).Scan(&ok); err != nil {
		return false, fmt.Errorf("check jobs of %d: %w", parent, err)
	}
	return ok, nil
}

// Queues lists the queues that have or had jobs (from the state counts, not from job rows),
// folding pending count changes first: the fold also keeps crawlq_job_count_delta small where
// nothing else reads stats.
func (c *Client) Queues(ctx context.Context) ([]string, error) {
	return c.queues(ctx)
}
