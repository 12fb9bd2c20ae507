package queue

import (
	"context"
	"time"

	"crawlq/internal/backoff"
	"crawlq/internal/clock"
	"crawlq/internal/db"
)

// stopHandlers is the first step of a stop, once the claim loop has returned: it closes the ready
// buffer (the handlers release the jobs in it unstarted, since Run's context is done), waits for
// the running handlers for StopGrace, then cancels them with ErrWorkerStopping (their jobs are
// released) and waits for them to return. handlersDone is startHandlers' channel.
func (w *Worker) stopHandlers(handlersDone <-chan struct{}) {
	w.mu.Lock()
	w.stopped, w.stopping = true, clock.StartStopwatch()
	close(w.ready)
	w.mu.Unlock()
	select {
	case <-handlersDone:
	case <-time.After(w.cfg.StopGrace):
		w.log.Warn("grace period over; cancelling running jobs", "grace", w.cfg.StopGrace)
		w.cancelAll(ErrWorkerStopping)
		<-handlersDone
	}
}

// stopWrites bounds how long a stopping worker retries the writes that hand its jobs back or record
// their outcomes while the database refuses them (a restart, a connection limit: SQLSTATE 53300).
// Each write that lands saves its job the attempt the rescue would count; a database that stays
// away longer than this does not hold the stop up, and the rescue returns those jobs.
const stopWrites = 15 * time.Second

// leaseLife bounds the retries of a write that records or hands back held jobs: their leases
// can be valid for as long as this after the write was first tried (a heartbeat may have just
// extended them), and no longer.
func (w *Worker) leaseLife() time.Duration { return 2 * w.cfg.Lease }

// writeLeft is how much longer an outcome write first tried at tried may retry: until the job's
// lease can no longer be valid (leaseLife), or, once Run is stopping, until stopWrites after the
// stop began, if sooner. Both are wall time that really passes while the write retries, whatever
// the client's Clock says.
func (w *Worker) writeLeft(tried clock.Stopwatch) time.Duration {
	left := w.leaseLife() - tried.Elapsed()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		left = min(left, stopWrites-w.stopping.Elapsed())
	}
	return left
}

// cancelAll ends the context of every running handler with cause.
func (w *Worker) cancelAll(cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.inflight {
		if h.cancel != nil {
			h.cancel(cause)
		}
	}
}

// releaseAll releases every job the worker still holds and has not lost, as Run returns.
func (w *Worker) releaseAll(ctx context.Context) {
	w.mu.Lock()
	var leases []Lease
	for id, h := range w.inflight {
		if !h.gone {
			leases = append(leases, h.job.Lease())
		}
		delete(w.inflight, id)
	}
	w.mu.Unlock()
	w.releaseLeases(ctx, leases)
}

// releaseJob hands one held job back (retrying briefly, see finish) without counting its attempt.
func (w *Worker) releaseJob(ctx context.Context, j *Job) {
	w.finishAs(ctx, j, nil, OutcomeReleased, func(ctx context.Context) error {
		_, err := w.c.Release(ctx, []Lease{j.Lease()})
		w.released.Add(1)
		return err
	})
}

// releaseLeases hands jobs back in one statement, retrying while the database refuses it for up to
// stopWrites (their leases outlast that); if it still fails their leases expire and the rescue
// brings them back, counting an attempt each, which the log and Stats.Unrecorded say.
func (w *Worker) releaseLeases(ctx context.Context, leases []Lease) {
	if len(leases) == 0 {
		return
	}
	tried := clock.StartStopwatch()
	for try := 1; ; try++ {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := w.c.Release(rctx, leases)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil || !db.IsTransient(err) || tried.Elapsed() > stopWrites {
			w.log.Error("could not release jobs; their leases will expire and the rescue returns them at the cost of an attempt",
				"jobs", len(leases), "err", err)
			w.unrecorded.Add(int64(len(leases)))
			for _, l := range leases {
				w.signal(Outcome{Job: l.ID, What: OutcomeUnrecorded})
			}
			return
		}
		w.log.Warn("the database refuses the release of held jobs; retrying", "jobs", len(leases), "try", try, "err", err)
		backoff.Sleep(ctx, writeRetry.Delay(try))
	}
	w.released.Add(int64(len(leases)))
	for _, l := range leases {
		w.signal(Outcome{Job: l.ID, What: OutcomeReleased})
	}
}
