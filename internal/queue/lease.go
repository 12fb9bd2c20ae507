package queue

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/dbsqlc"
)

// What a worker does with the jobs it holds: claim them, keep their leases alive, and end them
// (complete, fail, snooze, release, cancel). Every write after the claim is fenced by the lease
// token: a worker whose lease was lost changes nothing and gets ErrLeaseLost.

// ClaimParams says what to claim.
type ClaimParams struct {
	Queue  string
	Worker string        // recorded on each job; default "anonymous"
	Limit  int           // at most this many jobs; 1..10000
	Lease  time.Duration // lease length; default 30s
}

// Claim leases up to p.Limit due jobs of p.Queue in one statement. Each call uses a fresh random
// lease token shared by the jobs of that claim.
func (c *Client) Claim(ctx context.Context, p ClaimParams) ([]*Job, error) {
	if err := ValidateQueue(p.Queue); err != nil {
		return nil, err
	}
	if p.Limit < 1 || p.Limit > 10000 {
		return nil, fmt.Errorf("%w: claim limit %d: want 1..10000", ErrInvalid, p.Limit)
	}
	if p.Lease <= 0 {
		p.Lease = 30 * time.Second
	}
	if p.Worker == "" {
		p.Worker = "anonymous"
	}
	rows, err := c.q.ClaimJobs(ctx, dbsqlc.ClaimJobsParams{Queue: p.Queue, MaxJobs: int32(p.Limit), Now: c.now(),
		LeaseMs: p.Lease.Milliseconds(), LeaseToken: newToken(), Worker: p.Worker})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	jobs, err := jobsFromRows(rows)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	// The update returns rows in the order it found them (by id); hand them out in claim order.
	slices.SortFunc(jobs, func(a, b *Job) int {
		if a.Priority != b.Priority {
			return b.Priority - a.Priority
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return jobs, nil
}

// newToken returns a random non-zero lease token.
func newToken() int64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error (Go 1.24)
		if t := int64(binary.LittleEndian.Uint64(b[:]) >> 1); t != 0 {
			return t
		}
	}
}

// HeartbeatResult reports what a heartbeat learned.
type HeartbeatResult struct {
	// Lost are the ids whose lease the caller no longer holds.
	Lost []int64
	// CancelRequested are held jobs that have been asked to cancel.
	CancelRequested []int64
}

// Heartbeat extends the given leases to now + lease in one statement.
func (c *Client) Heartbeat(ctx context.Context, leases []Lease, lease time.Duration) (HeartbeatResult, error) {
	var res HeartbeatResult
	if len(leases) == 0 {
		return res, nil
	}
	if lease <= 0 {
		lease = 30 * time.Second
	}
	ids, tokens := split(leases)
	rows, err := c.q.HeartbeatJobs(ctx, dbsqlc.HeartbeatJobsParams{Now: c.now(), LeaseMs: lease.Milliseconds(), Ids: ids, Tokens: tokens})
	if err != nil {
		return res, fmt.Errorf("heartbeat: %w", err)
	}
	held := make(map[Lease]bool, len(rows))
	for _, r := range rows {
		held[Lease{ID: r.ID, Token: r.Token}] = true
		if r.CancelRequested {
			res.CancelRequested = append(res.CancelRequested, r.ID)
		}
	}
	for _, l := range leases {
		if !held[l] {
			res.Lost = append(res.Lost, l.ID)
		}
	}
	return res, nil
}

func split(leases []Lease) (ids, tokens []int64) {
	ids, tokens = make([]int64, len(leases)), make([]int64, len(leases))
	for i, l := range leases {
		ids[i], tokens[i] = l.ID, l.Token
	}
	return ids, tokens
}

// Complete marks a held job succeeded. ErrLeaseLost means the caller no longer held it.
func (c *Client) Complete(ctx context.Context, l Lease) error {
	return c.CompleteTx(ctx, c.pool, l)
}

// CompleteTx is Complete through db, so a handler can finish its job in the same transaction as
// the rows its work wrote.
func (c *Client) CompleteTx(ctx context.Context, db DB, l Lease) error {
	lost, err := c.CompleteManyTx(ctx, db, []Lease{l})
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		return fmt.Errorf("complete job %d: %w", l.ID, ErrLeaseLost)
	}
	return nil
}

// CompleteMany marks held jobs succeeded in one statement and returns the ids whose lease was lost.
func (c *Client) CompleteMany(ctx context.Context, leases []Lease) (lost []int64, err error) {
	return c.CompleteManyTx(ctx, c.pool, leases)
}

// CompleteManyTx is CompleteMany through db.
func (c *Client) CompleteManyTx(ctx context.Context, db DB, leases []Lease) (lost []int64, err error) {
	if len(leases) == 0 {
		return nil, nil
	}
	ids, tokens := split(leases)
	rows, err := dbsqlc.New(db).CompleteJobs(ctx, dbsqlc.CompleteJobsParams{Ids: ids, Tokens: tokens, Now: c.now()})
	if err != nil {
		return nil, fmt.Errorf("complete: %w", err)
	}
	done := make([]Lease, len(rows))
	for i, r := range rows {
		done[i] = Lease{ID: r.ID, Token: r.Token}
	}
	return lostLeases(leases, done), nil
}

// lostLeases returns the ids of the leases not in done (those a fenced statement changed).
func lostLeases(leases, done []Lease) []int64 {
	if len(done) == len(leases) {
		return nil
	}
	changed := make(map[Lease]bool, len(done))
	for _, l := range done {
		changed[l] = true
	}
	var lost []int64
	for _, l := range leases {
		if !changed[l] {
			lost = append(lost, l.ID)
		}
	}
	return lost
}

// LeaseLostError names the jobs whose lease was lost in a Tx, which then committed nothing.
type LeaseLostError struct{ IDs []int64 }

func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("queue: lease lost for %d job(s) %v", len(e.IDs), e.IDs)
}

// Is makes errors.Is(err, ErrLeaseLost) true.
func (e *LeaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// FailOptions refine a failure.
type FailOptions struct {
	// RetryIn overrides the backoff (for example a server's Retry-After). Zero uses the backoff.
	RetryIn time.Duration
	// Dead ends the job now, without further attempts.
	Dead bool
}

// Fail records a failed attempt of the held job j. The job is retried after the backoff (or
// opts.RetryIn) while attempts remain, else it is dead with cause kept in its error history.
// It returns the job's new state.
func (c *Client) Fail(ctx context.Context, j *Job, cause error, opts FailOptions) (State, error) {
	delay := opts.RetryIn
	if delay <= 0 {
		delay = c.Backoff(j.Attempt)
	}
	row, err := c.q.FailJob(ctx, dbsqlc.FailJobParams{ID: j.ID, LeaseToken: j.LeaseToken, RetryUs: delay.Microseconds(),
		Error: errorText(cause, "unknown error"), Dead: opts.Dead, KeptErrors: maxKeptErrors, Now: c.now()})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("fail job %d: %w", j.ID, ErrLeaseLost)
	}
	if err != nil {
		return "", fmt.Errorf("fail job %d: %w", j.ID, err)
	}
	return State(row.State), nil
}

// errorText is cause as kept in a job's error history (at most maxErrorLen bytes), or def.
func errorText(cause error, def string) string {
	msg := def
	if cause != nil {
		msg = cause.Error()
	}
	if len(msg) > maxErrorLen {
		msg = msg[:maxErrorLen]
	}
	return msg
}

// Snooze puts a held job back to run after d without counting the attempt.
func (c *Client) Snooze(ctx context.Context, l Lease, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: snooze %s: must not be negative", ErrInvalid, d)
	}
	lost, err := c.snooze(ctx, "snooze", []Lease{l}, d)
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		return fmt.Errorf("snooze job %d: %w", l.ID, ErrLeaseLost)
	}
	return nil
}

// Release hands held jobs back without counting the attempt: they are available again at their
// old place in line. It returns the ids whose lease was already lost.
func (c *Client) Release(ctx context.Context, leases []Lease) (lost []int64, err error) {
	return c.snooze(ctx, "release", leases, 0)
}

func (c *Client) snooze(ctx context.Context, verb string, leases []Lease, d time.Duration) ([]int64, error) {
	if len(leases) == 0 {
		return nil, nil
	}
	ids, tokens := split(leases)
	rows, err := c.q.SnoozeJobs(ctx, dbsqlc.SnoozeJobsParams{Ids: ids, Tokens: tokens, DelayUs: d.Microseconds(), Now: c.now()})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", verb, err)
	}
	done := make([]Lease, len(rows))
	for i, r := range rows {
		done[i] = Lease{ID: r.ID, Token: r.Token}
	}
	return lostLeases(leases, done), nil
}

// CancelHeld ends a held job as cancelled, fenced by its lease, with cause in its error history.
func (c *Client) CancelHeld(ctx context.Context, l Lease, cause error) error {
	_, err := c.q.CancelHeldJob(ctx, dbsqlc.CancelHeldJobParams{ID: l.ID, LeaseToken: l.Token,
		Error: errorText(cause, "cancelled"), KeptErrors: maxKeptErrors, Now: c.now()})
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("cancel job %d: %w", l.ID, ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("cancel job %d: %w", l.ID, err)
	}
	return nil
}
