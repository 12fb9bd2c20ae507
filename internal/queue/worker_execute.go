package queue

import (
	"context"
	"errors"
	"fmt"
)

// work runs one job. runCtx is Run's context: once it is done, unstarted jobs are released.
func (w *Worker) work(workCtx, runCtx context.Context, j *Job, done chan<- Lease) {
	jctx, cancel := context.WithCancelCause(workCtx)
	defer cancel(nil)
	w.mu.Lock()
	h := w.inflight[j.ID]
	if h == nil || h.gone {
		delete(w.inflight, j.ID)
		w.mu.Unlock()
		return
	}
	h.cancel = cancel
	cancelNow := j.CancelRequested
	w.mu.Unlock()
	if runCtx.Err() != nil {
		w.releaseJob(workCtx, j)
		return
	}
	if cancelNow {
		cancel(ErrCancelRequested)
	}
	err := w.safeHandle(jctx, j)
	if cause := context.Cause(jctx); cause != nil && err != nil {
		switch {
		case errors.Is(cause, ErrLeaseLost):
			w.lost.Add(1)
			w.forget(j.ID)
			return
		case errors.Is(cause, ErrWorkerStopping):
			w.releaseJob(workCtx, j)
			return
		}
	}
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
	case errors.As(err, &jerr) && jerr.deferred:
		w.deferred.Add(1)
		d := deferBackoff(w.faults.Add(1))
		w.log.Warn("job met a fault that is not its own; put back without counting the attempt",
			"job", j.ID, "kind", j.Kind, "in", d, "err", err)
		w.finish(workCtx, j, func(ctx context.Context) error { return w.c.Snooze(ctx, j.Lease(), d) })
	case errors.As(err, &jerr) && jerr.cancel:
		w.cancelled.Add(1)
		w.finish(workCtx, j, func(ctx context.Context) error { return w.c.CancelHeld(ctx, j.Lease(), err) })
	case errors.As(err, &snooze):
		w.snoozed.Add(1)
		w.finish(workCtx, j, func(ctx context.Context) error { return w.c.Snooze(ctx, j.Lease(), snooze.d) })
	default:
		opts := FailOptions{}
		if errors.As(err, &jerr) {
			opts.RetryIn, opts.Dead = jerr.retryIn, jerr.permanent
		}
		w.failed.Add(1)
		w.finish(workCtx, j, func(ctx context.Context) error {
			st, ferr := w.c.Fail(ctx, j, err, opts)
			if ferr == nil {
				w.log.Debug("job failed", "job", j.ID, "kind", j.Kind, "attempt", j.Attempt, "state", st, "err", err)
			}
			return ferr
		})
	}
}

// safeHandle runs the handler, turning a panic into a failed attempt rather than a dead worker.
func (w *Worker) safeHandle(ctx context.Context, j *Job) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	return w.h(ctx, j)
}
