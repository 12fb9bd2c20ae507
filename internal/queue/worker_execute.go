package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"crawlq/internal/clock"
)

// startHandlers starts Concurrency handlers, each taking jobs from the ready buffer and working
// them one at a time until the buffer is closed. The returned channel is closed once every
// handler has returned.
func (w *Worker) startHandlers(workCtx, runCtx context.Context, done chan<- Lease) <-chan struct{} {
	ready := w.ready
	var handlers sync.WaitGroup
	for range w.cfg.Concurrency {
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			for j := range ready {
				w.wakeClaimer()
				w.addBusy(1)
				w.work(workCtx, runCtx, j, done)
				w.addBusy(-1)
			}
		}()
	}
	finished := make(chan struct{})
	go func() { handlers.Wait(); close(finished) }()
	return finished
}

// addBusy counts handlers working a job (Reserve hands work only to the others).
func (w *Worker) addBusy(n int) {
	w.mu.Lock()
	w.busy += n
	w.mu.Unlock()
}

// work runs one job and records what became of it. workCtx outlives Run's context by the grace
// period; runCtx is Run's context: once it is done, unstarted jobs are released. A successful
// job's lease goes to done, for the completer to write in a batch.
func (w *Worker) work(workCtx, runCtx context.Context, j *Job, done chan<- Lease) {
	jctx, cancel := context.WithCancelCause(workCtx)
	defer cancel(nil)
	cancelNow, ok := w.begin(j, cancel)
	if !ok {
		return
	}
	if runCtx.Err() != nil {
		w.releaseJob(workCtx, j)
		return
	}
	if cancelNow {
		cancel(ErrCancelRequested)
	}
	err := w.safeHandle(jctx, j)
	if w.interrupted(workCtx, jctx, j, err) {
		return
	}
	w.record(workCtx, j, err, done)
}

// begin marks j as started, with cancel to end its handler's context (a heartbeat that learns of
// a lost lease or a cancel request calls it). It reports false, forgetting j, if j's lease was
// lost while it waited for a handler; cancelNow reports a cancel request that came meanwhile.
func (w *Worker) begin(j *Job, cancel context.CancelCauseFunc) (cancelNow, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.inflight[j.ID]
	if h == nil || h.gone {
		delete(w.inflight, j.ID)
		return false, false
	}
	h.cancel = cancel
	w.lastWait = h.handed.Elapsed()
	w.sinceTake = clock.StartStopwatch()
	return j.CancelRequested, true
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

// interrupted deals with a handler that failed because the worker ended its context: a lost lease
// (the job is someone else's now: nothing is written) or the end of the stop's grace period (the
// job is released, its attempt not counted). It reports whether it did.
func (w *Worker) interrupted(workCtx, jctx context.Context, j *Job, err error) bool {
	cause := context.Cause(jctx)
	if cause == nil || err == nil {
		return false
	}
	switch {
	case errors.Is(cause, ErrLeaseLost):
		w.lost.Add(1)
		w.forget(j.ID)
		w.signal(Outcome{Job: j.ID, What: OutcomeLost, Err: err})
		return true
	case errors.Is(cause, ErrWorkerStopping):
		w.releaseJob(workCtx, j)
		return true
	}
	return false
}
