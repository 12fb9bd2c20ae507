package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/dbsqlc"
)

// Tx is one transaction sent in one round trip: a worker's completions (fenced by their leases),
// the jobs its work found (some of them into a Reservation, already leased to it), and statements
// of its own (its stats, its items), committed together or not at all. A crawl ends a page this
// way: the page's work and its completion commit exactly once, and the new pages it found with it.
//
// Build it with Client.NewTx, queue work on it in the order it should run, and Send it once (or
// Discard it).
// Statements are not run until Send, so results (Enqueue's out, a Reservation's Jobs, the
// callbacks of the caller's statements) are filled in by Send.
//
// The statements are sent as one pgx batch, which the server runs as one implicit transaction
// (every exec mode: the extended protocol's pipeline ends in one Sync, the simple protocol sends
// one multi-statement query), so no BEGIN or COMMIT is sent: each would be a statement of its own
// for the server to parse and run, and they were two of the three statements of a page's
// discovery and two of the five of a completion batch.
type Tx struct {
	c     *Client
	b     pgx.Batch
	res   []*Reservation
	sent  bool
	empty bool // nothing queued yet
}

// NewTx returns an empty transaction on the client's pool.
func (c *Client) NewTx() *Tx {
	return &Tx{c: c, empty: true}
}

// Complete queues the completion of held jobs. If any of their leases was lost, Send commits
// nothing and returns a *LeaseLostError naming them.
func (t *Tx) Complete(leases []Lease) {
	if len(leases) == 0 {
		return
	}
	t.empty = false
	ids, tokens := split(leases)
	q := dbsqlc.QueueExec(&t.b, (*dbsqlc.Queries).CompleteJobsOrAbort,
		dbsqlc.CompleteJobsOrAbortParams{Ids: ids, Tokens: tokens, Now: t.c.now()})
	q.Fn = func(br pgx.BatchResults) error {
		_, err := br.Exec()
		if lost := leaseLost(err); lost != nil {
			return lost
		}
		if err != nil {
			return fmt.Errorf("complete: %w", err)
		}
		return nil
	}
}

// leaseLost turns the error CompleteJobsOrAbort raises for lost leases (SQLSTATE CQ001, from
// crawlq_lease_lost, the ids in its detail) into a *LeaseLostError, or returns nil.
func leaseLost(err error) *LeaseLostError {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "CQ001" {
		return nil
	}
	lost := &LeaseLostError{}
	for _, f := range strings.Split(pgErr.Detail, ",") {
		if id, perr := strconv.ParseInt(f, 10, 64); perr == nil {
			lost.IDs = append(lost.IDs, id)
		}
	}
	return lost
}

// Enqueue queues the insert of ps, which must not have unique keys (folding duplicates needs the
// answers of earlier statements; once keys are fine; see EnqueueManyTx for unique keys). With
// limit > 0 at most limit jobs are inserted, the first ones not skipped for their once key (the
// once keys of those past the limit stay unused). Invalid params are reported at once
// and queue nothing. out (len(ps)) receives the results when Send has run: a job not inserted has
// ID 0, and Duplicate set if its once key was used.
func (t *Tx) Enqueue(ps []EnqueueParams, limit int, out []EnqueueResult) error {
	if len(out) != len(ps) || limit < 0 {
		return fmt.Errorf("%w: enqueue: %d results for %d jobs, limit %d", ErrInvalid, len(out), len(ps), limit)
	}
	if err := validateOnceBatch(ps); err != nil || len(ps) == 0 {
		return err
	}
	t.empty = false
	arg, read := t.c.insertOnce(ps, allOf(ps), limit, out)
	dbsqlc.QueueMany(&t.b, (*dbsqlc.Queries).InsertJobsOnce, arg, read)
	return nil
}

// EnqueueHeld queues the insert of ps as jobs already running under reservation r (see
// Reservation). Send ends r: it hands the inserted jobs to r's worker once they committed, and
// frees r's room when they did not. Invalid params are reported at once, queue nothing and leave r
// to the caller.
func (t *Tx) EnqueueHeld(r *Reservation, ps []EnqueueParams) error {
	arg, err := r.insertArgs(ps)
	if err != nil || len(ps) == 0 {
		return err
	}
	t.empty = false
	t.res = append(t.res, r)
	dbsqlc.QueueMany(&t.b, (*dbsqlc.Queries).InsertHeldJobs, arg, func(rows []dbsqlc.InsertHeldJobsRow) error {
		jobs, err := heldJobs(arg, rows)
		if err != nil {
			return fmt.Errorf("enqueue held: %w", err)
		}
		r.jobs = jobs
		return nil
	})
	return nil
}

// Queue queues a statement of the caller's, run in the transaction in the order queued. It has
// pgx.Batch's signature, so code that queues its statements through an interface of that method
// (items.TxSink) queues them here. The statement must not end the transaction.
func (t *Tx) Queue(sql string, args ...any) *pgx.QueuedQuery {
	t.empty = false
	return t.b.Queue(sql, args...)
}

// Send runs the transaction in one round trip on a connection of its own and commits it. On an
// error the transaction is rolled back (a connection that cannot roll back is closed, so the pool
// drops it), a lost lease is reported as a *LeaseLostError, and the reservations queued with
// EnqueueHeld are cancelled. A Tx is sent once.
//
// ctx bounds the wait for a connection; once the batch is sent, Send waits for its answer (up to
// sendTimeout) even when ctx is cancelled. An answer dropped after the server committed would
// leave held jobs committed, leased to this worker and never handed to it: each would wait out its
// lease and lose an attempt to the rescue, and worker stops cancel these contexts every time. Only
// a connection lost after the COMMIT went out leaves the outcome unknown; such jobs are rescued
// like those of a crashed worker.
func (t *Tx) Send(ctx context.Context) error {
	if t.sent {
		return errors.New("queue: Tx sent twice")
	}
	t.sent = true
	err := t.send(ctx)
	for _, r := range t.res {
		if err == nil {
			r.Hand()
		} else {
			r.Cancel()
		}
	}
	return err
}

// Discard ends a Tx that will not be sent (or was): it frees the room of the reservations queued
// with EnqueueHeld. A Tx that is neither sent nor discarded keeps that room taken.
func (t *Tx) Discard() {
	t.sent = true
	for _, r := range t.res {
		r.Cancel()
	}
}

// sendTimeout bounds how long Send waits for a sent batch's answer, whatever its caller's context
// says. A completion with its pages' items takes milliseconds on a healthy server; this only stops
// a dead connection from holding a stopping worker for ever.
const sendTimeout = time.Minute

func (t *Tx) send(ctx context.Context) error {
	if t.empty {
		return nil
	}
	conn, err := t.c.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("queue tx: %w", err)
	}
	defer conn.Release()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	if err := conn.SendBatch(sctx, &t.b).Close(); err != nil {
		rollback(conn)
		var lost *LeaseLostError
		if errors.As(err, &lost) {
			return lost
		}
		return fmt.Errorf("queue tx: %w", err)
	}
	return nil
}

// rollback ends conn's transaction, if any, after a failed batch (the server rolls an implicit
// transaction back itself; a batch cut off midway may leave one open); a connection that cannot
// is closed, so the pool drops it.
func rollback(conn *pgxpool.Conn) {
	if conn.Conn().PgConn().TxStatus() == 'I' { // idle: no transaction open
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		// The connection is unusable; closing it is all that is left, and its error says nothing more.
		_ = conn.Conn().Close(ctx)
	}
}
