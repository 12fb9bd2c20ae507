package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"crawlq/internal/dbsqlc"
)

// A process that finds new work while handling a job (a crawl page finding links) can hand some
// of it to its own idle handlers instead of sending it through the queue: Worker.Reserve sets
// aside room, the caller inserts the jobs already leased to the worker in its transaction
// (Tx.EnqueueHeld), and once that committed, the Tx hands them to the handlers. They skip
// the claim: no claim statement, no wait for the next poll or poke. A crash loses nothing: the
// jobs are leased like claimed ones and the rescue brings them back when the lease expires.
//
// The handed jobs run before jobs waiting in the queue, whatever their priority. Only handlers that
// are idle right now are handed work, and other workers claim the rest, unless the worker holds
// jobs ahead (WorkerConfig.HoldAhead): then up to that many more wait in the worker for a handler,
// as long as the jobs waiting there start promptly.

// Reservation is room set aside in a worker for jobs its process inserts itself.
type Reservation struct {
	w     *Worker
	n     int
	token int64
	jobs  []*Job
	done  bool
}

// Reserve sets aside room for up to n jobs that idle handlers can start at once (and for
// HoldAhead more, see the top of this file), or returns nil when there is none (or the worker is
// stopping, or recycles after MaxJobs). Otherwise only idle handlers count, so that work a busy
// process finds goes to the queue, where other workers can take it now, rather than waiting here.
// The reservation ends with Hand or Cancel (Tx.Send calls one).
func (w *Worker) Reserve(n int) *Reservation {
	if n <= 0 || w.cfg.MaxJobs > 0 {
		return nil
	}
	w.mu.Lock()
	k := 0
	if !w.stopped {
		k = max(min(n, w.holdLocked()), 0)
		w.reserved += k
	}
	w.mu.Unlock()
	if k == 0 {
		return nil
	}
	return &Reservation{w: w, n: k, token: newToken()}
}

// Room is how many jobs Reserve could take now (a snapshot: others may take it meanwhile).
func (w *Worker) Room() int { return w.snapshot(w.holdLocked) }

// Idle is how many jobs idle handlers could start now, not counting those the worker would hold
// ahead (a snapshot).
func (w *Worker) Idle() int { return w.snapshot(w.idleLocked) }

// snapshot reads room under w.mu: none for a stopping worker or one that recycles (as Reserve).
func (w *Worker) snapshot(room func() int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.cfg.MaxJobs > 0 {
		return 0
	}
	return max(room(), 0)
}

// Len is how many jobs the reservation has room for.
func (r *Reservation) Len() int { return r.n }

// Jobs returns the jobs inserted through Tx.EnqueueHeld, once the Tx has been sent.
func (r *Reservation) Jobs() []*Job { return r.jobs }

// insertArgs checks ps (at most Len, due now, without unique keys, on the worker's queue, each
// once key at most once) and returns the InsertHeldJobs arguments that insert them as jobs already
// running under the reservation's lease (see Tx.EnqueueHeld).
func (r *Reservation) insertArgs(ps []EnqueueParams) (dbsqlc.InsertHeldJobsParams, error) {
	if len(ps) > r.n {
		return dbsqlc.InsertHeldJobsParams{}, fmt.Errorf("%w: %d jobs for a reservation of %d", ErrInvalid, len(ps), r.n)
	}
	var errs []error
	seen := names{}
	keys := map[onceID]bool{}
	for i := range ps {
		p := &ps[i]
		err := p.validate(seen)
		if err == nil && (p.UniqueKey != "" || p.Delay != 0 || !p.RunAt.IsZero()) {
			err = fmt.Errorf("%w: a held job is due now and has no unique key", ErrInvalid)
		}
		if err == nil && p.Queue != r.w.cfg.Queue {
			err = fmt.Errorf("%w: queue %q: the reservation is on queue %q", ErrInvalid, p.Queue, r.w.cfg.Queue)
		}
		if k := (onceID{p.ParentID, p.OnceKey}); err == nil && k.key != "" {
			if keys[k] {
				err = fmt.Errorf("%w: once key %q repeated in one reservation", ErrInvalid, k.key)
			}
			keys[k] = true
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("job %d: %w", i, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return dbsqlc.InsertHeldJobsParams{}, err
	}
	col := columnsOf(ps, allOf(ps))
	cfg := &r.w.cfg
	return dbsqlc.InsertHeldJobsParams{Queues: col.queues, Kinds: col.kinds, Priorities: col.prios, MaxAttempts: col.maxes,
		ParentIds: col.parents, Args: col.args, Hashes: col.onces, Now: r.w.c.now(), LeaseMs: cfg.Lease.Milliseconds(),
		LeaseToken: r.token, Worker: cfg.ID}, nil
}

// heldJobs returns the jobs the held insert with arg made, from its answer: each new job's id,
// position in arg's arrays and start. The rest of a job is what arg sent (defaults applied),
// running under arg's lease from its start.
func heldJobs(arg dbsqlc.InsertHeldJobsParams, rows []dbsqlc.InsertHeldJobsRow) ([]*Job, error) {
	jobs := make([]*Job, len(rows))
	for i, row := range rows {
		k := int(row.Pos) - 1
		if k < 0 || k >= len(arg.Queues) {
			return nil, fmt.Errorf("result for job %d of %d", row.Pos, len(arg.Queues))
		}
		at := row.StartedAt
		until := at.Add(time.Duration(arg.LeaseMs) * time.Millisecond)
		jobs[i] = &Job{ID: row.ID, Queue: arg.Queues[k], Kind: arg.Kinds[k], State: StateRunning,
			Args: json.RawMessage(arg.Args[k]), Priority: int(arg.Priorities[k]), RunAt: at, Attempt: 1,
			MaxAttempts: int(arg.MaxAttempts[k]), LeaseUntil: &until, LeaseToken: arg.LeaseToken, Worker: arg.Worker,
			ParentID: arg.ParentIds[k], CreatedAt: at, StartedAt: &at}
	}
	return jobs, nil
}

// Hand gives the inserted jobs to the worker's handlers; call it once the transaction that
// inserted them has committed. Unused room is freed. A worker that has stopped meanwhile releases
// the jobs instead, for others to claim.
func (r *Reservation) Hand() {
	if r == nil || r.done {
		return
	}
	r.done = true
	if r.w.hand(r.jobs, r.n, true) {
		return
	}
	r.w.releaseLeases(context.Background(), leasesOf(r.jobs))
}

// Cancel frees the room; call it when the transaction did not commit.
func (r *Reservation) Cancel() {
	if r == nil || r.done {
		return
	}
	r.done = true
	r.w.giveBack(r.n, true)
}
