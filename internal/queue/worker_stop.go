package queue

import (
	"context"
	"time"
)

// stopHandlers is the first step of a stop, once the claim loop has returned: it closes the ready
// buffer (the handlers release the jobs in it unstarted, since Run's context is done), waits for
// the running handlers for StopGrace, then cancels them with ErrWorkerStopping (their jobs are
// released) and waits for them to return. handlersDone is startHandlers' channel.
func (w *Worker) stopHandlers(handlersDone <-chan struct{}) {
	w.mu.Lock()
	w.stopped = true
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

// isStopped reports whether Run is stopping: outcome writes then give up sooner, so a stop is not
// held up by a database that is down (the leases expire and the rescue returns the jobs).
func (w *Worker) isStopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopped
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
	w.finish(ctx, j, func(ctx context.Context) error {
		_, err := w.c.Release(ctx, []Lease{j.Lease()})
		w.released.Add(1)
		return err
	})
}

// releaseLeases hands jobs back in one statement when stopping; if that fails their leases expire
// and the rescue brings them back.
func (w *Worker) releaseLeases(ctx context.Context, leases []Lease) {
	if len(leases) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := w.c.Release(rctx, leases); err != nil {
		w.log.Warn("release on stop failed; the leases will expire", "jobs", len(leases), "err", err)
	}
	w.released.Add(int64(len(leases)))
}
