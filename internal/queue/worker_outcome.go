package queue

import (
	"context"
	"errors"
	"slices"
	"time"

	"crawlq/internal/backoff"
	"crawlq/internal/clock"
	"crawlq/internal/db"
)

// record writes what a handler's error asks for (see Handler and outcome.go): a success goes to
// done, for the completer to write in a batch; every other outcome is written at once (finish).
func (w *Worker) record(ctx context.Context, j *Job, err error, done chan<- Lease) {
	var snooze *snoozeError
	var jerr *jobError
	if !IsDeferred(err) {
		w.faults.Store(0)
	}
	switch {
	case err == nil:
		done <- j.Lease()
	case errors.Is(err, ErrCompleted):
		w.succeeded.Add(1)
		w.forget(j.ID)
		w.signal(Outcome{Job: j.ID, What: OutcomeCompleted, Err: err})
	case errors.As(err, &jerr) && jerr.deferred:
		w.deferred.Add(1)
		d := deferBackoff(w.faults.Add(1))
		w.log.Warn("job met a fault that is not its own; put back without counting the attempt",
			"job", j.ID, "kind", j.Kind, "in", d, "err", err)
		w.finishAs(ctx, j, err, OutcomeDeferred, func(ctx context.Context) error { return w.c.Snooze(ctx, j.Lease(), d) })
	case errors.As(err, &jerr) && jerr.cancel:
		w.cancelled.Add(1)
		w.finishAs(ctx, j, err, OutcomeCancelled, func(ctx context.Context) error { return w.c.CancelHeld(ctx, j.Lease(), err) })
	case errors.As(err, &snooze):
		w.snoozed.Add(1)
		w.finishAs(ctx, j, err, OutcomeSnoozed, func(ctx context.Context) error { return w.c.Snooze(ctx, j.Lease(), snooze.d) })
	default:
		opts := FailOptions{}
		if errors.As(err, &jerr) {
			opts.RetryIn, opts.Dead = jerr.retryIn, jerr.permanent
		}
		w.failed.Add(1)
		var st State
		o := w.finish(ctx, j, func(ctx context.Context) error {
			var ferr error
			st, ferr = w.c.Fail(ctx, j, err, opts)
			if ferr == nil {
				w.log.Debug("job failed", "job", j.ID, "kind", j.Kind, "attempt", j.Attempt, "state", st, "err", err)
			}
			return ferr
		})
		if o != "" {
			w.signal(Outcome{Job: j.ID, What: o, Err: err})
		} else {
			w.signal(Outcome{Job: j.ID, What: OutcomeFailed, State: st, Err: err})
		}
	}
}

// finishAs is finish for an outcome that is what when written; it tells a test (signal).
func (w *Worker) finishAs(ctx context.Context, j *Job, err error, what string, write func(context.Context) error) {
	if o := w.finish(ctx, j, write); o != "" {
		what = o
	}
	w.signal(Outcome{Job: j.ID, What: what, Err: err})
}

// finish runs a fenced write for j, then forgets the job. It retries while the database is
// unreachable, for as long as the job's lease token can still be valid: nobody takes the job
// from this worker before its lease has expired and a rescue has run, which needs the database
// too. So after an outage the worker records what its jobs did within a second or so of the
// database coming back, instead of leaving them to expire and be rescued (at the cost of an
// attempt) half a minute later. It returns "" when the write landed, else OutcomeLost or
// OutcomeUnrecorded.
func (w *Worker) finish(ctx context.Context, j *Job, write func(context.Context) error) string {
	defer w.forget(j.ID)
	tried := clock.StartStopwatch()
	for try := 1; ; try++ {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := write(wctx)
		cancel()
		if err == nil {
			return ""
		}
		if errors.Is(err, ErrLeaseLost) {
			w.lost.Add(1)
			return OutcomeLost
		}
		// Only a fault of the database is worth waiting out; anything else gets a few tries. A
		// stopping worker waits it out too, for a while: a write that never lands costs the job an
		// attempt when the rescue returns it.
		if ctx.Err() != nil || w.writeLeft(tried) <= 0 || (try >= 5 && !db.IsTransient(err)) {
			w.log.Error("could not record job outcome; its lease will expire and it will be rescued", "job", j.ID, "err", err)
			w.unrecorded.Add(1)
			return OutcomeUnrecorded
		}
		if try == 1 {
			w.log.Warn("the database refuses the write of a job's outcome; retrying", "job", j.ID, "for at most", w.writeLeft(tried), "err", err)
		}
		backoff.Sleep(ctx, writeRetry.Delay(try))
	}
}

// writeRetry is the wait between tries of an outcome write: 50 ms, doubling, at most a second, so
// that outcomes are recorded within about a second of the database coming back.
var writeRetry = backoff.Policy{Base: 50 * time.Millisecond, Max: time.Second}

// forget drops a job the worker no longer holds: heartbeats stop extending its lease.
func (w *Worker) forget(id int64) {
	w.mu.Lock()
	delete(w.inflight, id)
	w.mu.Unlock()
}

// startCompleter starts the goroutine that writes the completions sent on done (see complete);
// the returned channel is closed once done is closed and the last batch written.
func (w *Worker) startCompleter(ctx context.Context, done <-chan Lease) <-chan struct{} {
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		w.complete(ctx, done)
	}()
	return finished
}

// complete writes successful completions in batches: it takes whatever has queued up while the
// previous batch was being written, so batches grow with load and nothing waits on a timer.
func (w *Worker) complete(ctx context.Context, done <-chan Lease) {
	batch := make([]Lease, 0, w.cfg.CompleteBatch)
	for l := range done {
		batch = append(batch[:0], l)
	fill:
		for len(batch) < w.cfg.CompleteBatch {
			select {
			case l, ok := <-done:
				if !ok {
					break fill
				}
				batch = append(batch, l)
			default:
				break fill
			}
		}
		w.completeBatch(ctx, batch)
	}
}

// completeBatch writes one batch of completions, retrying while the leases can be valid, as
// finish does.
func (w *Worker) completeBatch(ctx context.Context, batch []Lease) {
	tried := clock.StartStopwatch()
	for try := 1; ; try++ {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		lost, err := w.c.CompleteMany(wctx, batch)
		cancel()
		if err == nil {
			w.completed(batch, lost)
			return
		}
		if ctx.Err() != nil || tried.Elapsed() > w.leaseLife() {
			w.log.Error("could not record completions; their leases will expire and the jobs will be rescued", "n", len(batch), "err", err)
			w.unrecorded.Add(int64(len(batch)))
			for _, l := range batch {
				w.signal(Outcome{Job: l.ID, What: OutcomeUnrecorded})
			}
			return
		}
		backoff.Sleep(ctx, writeRetry.Delay(try))
	}
}

// completed counts a written batch of completions, of which the jobs in lost were no longer
// this worker's, and forgets them all.
func (w *Worker) completed(batch []Lease, lost []int64) {
	w.succeeded.Add(int64(len(batch) - len(lost)))
	w.lost.Add(int64(len(lost)))
	if len(lost) > 0 {
		w.log.Warn("completed jobs whose lease was lost were not recorded", "jobs", lost)
	}
	w.mu.Lock()
	for _, l := range batch {
		delete(w.inflight, l.ID)
	}
	w.mu.Unlock()
	if w.cfg.TestSignals != nil {
		for _, l := range batch {
			if slices.Contains(lost, l.ID) {
				w.signal(Outcome{Job: l.ID, What: OutcomeLost})
			} else {
				w.signal(Outcome{Job: l.ID, What: OutcomeCompleted})
			}
		}
	}
}
