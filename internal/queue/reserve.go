package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// A process that finds new work while handling a job (a crawl page finding links) can hand some
// of it to its own idle handlers instead of sending it through the queue: Worker.Reserve sets
// aside room, the caller inserts the jobs already leased to the worker in its own transaction
// (Reservation.EnqueueBatch), and once that committed, Hand gives them to the handlers. They skip
// the claim: no claim statement, no wait for the next poll or poke. A crash loses nothing: the
// jobs are leased like claimed ones and the rescue brings them back when the lease expires.
//
// The handed jobs run before jobs waiting in the queue, whatever their priority; only handlers that
// are idle right now are handed work, and other workers claim the rest.

// Reservation is room set aside in a worker for jobs its process inserts itself.
type Reservation struct {
	w     *Worker
	n     int
	token int64
	jobs  []*Job
	done  bool
}

// Reserve sets aside room for up to n jobs that idle handlers can start at once, or returns nil
// when there is none (or the worker is stopping, or recycles after MaxJobs). Only idle handlers
// count, so that work a busy process finds goes to the queue, where other workers can take it
// now, rather than waiting here. The caller must end the reservation with Hand or Cancel.
func (w *Worker) Reserve(n int) *Reservation {
	if n <= 0 || w.cfg.MaxJobs > 0 {
		return nil
	}
	w.mu.Lock()
	k := 0
	if !w.stopped {
		k = max(min(n, w.idleLocked()), 0)
		w.reserved += k
	}
	w.mu.Unlock()
	if k == 0 {
		return nil
	}
	return &Reservation{w: w, n: k, token: newToken()}
}

// Room is how many jobs Reserve could take now (a snapshot: others may take it meanwhile).
func (w *Worker) Room() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.cfg.MaxJobs > 0 {
		return 0
	}
	return max(w.idleLocked(), 0)
}

// Len is how many jobs the reservation has room for.
func (r *Reservation) Len() int { return r.n }

// Jobs returns the jobs inserted through EnqueueBatch, once its results have been read.
func (r *Reservation) Jobs() []*Job { return r.jobs }

// EnqueueBatch queues on b the insert of ps (at most Len, due now, without unique keys) as jobs
// already running under the reservation's lease; those whose once key was used before are skipped.
// Invalid params are reported at once and queue nothing.
func (r *Reservation) EnqueueBatch(b *pgx.Batch, ps []EnqueueParams) error {
	if len(ps) > r.n {
		return fmt.Errorf("%w: %d jobs for a reservation of %d", ErrInvalid, len(ps), r.n)
	}
	var errs []error
	seen := names{}
	for i := range ps {
		p := &ps[i]
		err := p.validate(seen)
		if err == nil && (p.UniqueKey != "" || p.Delay != 0 || !p.RunAt.IsZero()) {
			err = fmt.Errorf("%w: a held job is due now and has no unique key", ErrInvalid)
		}
		if err == nil && p.Queue != r.w.cfg.Queue {
			err = fmt.Errorf("%w: queue %q: the reservation is on queue %q", ErrInvalid, p.Queue, r.w.cfg.Queue)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("job %d: %w", i, err))
		}
	}
	if err := errors.Join(errs...); err != nil || len(ps) == 0 {
		return err
	}
	keys := map[onceID]bool{}
	idx := make([]int, len(ps))
	for i := range ps {
		idx[i] = i
		if k := ps[i].OnceKey; k != "" {
			if keys[onceID{ps[i].ParentID, k}] {
				return fmt.Errorf("%w: job %d: once key %q repeated in one reservation", ErrInvalid, i, k)
			}
			keys[onceID{ps[i].ParentID, k}] = true
		}
	}
	c := columnsOf(ps, idx)
	cfg := &r.w.cfg
	b.Queue(sqlInsertHeld, c.queues, c.kinds, c.prios, c.maxes, c.parents, c.args, cfg.Lease.Milliseconds(), r.token, cfg.ID, c.onces).Query(func(rows pgx.Rows) error {
		jobs, err := scanHeld(rows, cfg.Queue, r.token, cfg.ID)
		r.jobs = jobs
		return err
	})
	return nil
}

func scanHeld(rows pgx.Rows, queue string, token int64, worker string) ([]*Job, error) {
	defer rows.Close()
	var jobs []*Job
	for rows.Next() {
		j := &Job{Queue: queue, State: StateRunning, LeaseToken: token, Worker: worker}
		var prio int16
		var lease, started time.Time
		if err := rows.Scan(&j.ID, &j.Kind, &j.Args, &prio, &j.RunAt, &j.Attempt, &j.MaxAttempts, &lease,
			&j.ParentID, &j.CreatedAt, &started); err != nil {
			return nil, fmt.Errorf("enqueue held: %w", err)
		}
		j.Priority = int(prio)
		j.LeaseUntil, j.StartedAt = &lease, &started
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("enqueue held: %w", err)
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
	leases := make([]Lease, len(r.jobs))
	for i, j := range r.jobs {
		leases[i] = j.Lease()
	}
	r.w.releaseLeases(context.Background(), leases)
}

// Cancel frees the room; call it when the transaction did not commit.
func (r *Reservation) Cancel() {
	if r == nil || r.done {
		return
	}
	r.done = true
	r.w.giveBack(r.n, true)
}
