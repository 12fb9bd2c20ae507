package queue

import (
	"context"
	"time"
)

// startHeartbeat starts the loop that beats every HeartbeatInterval (see beat); the returned
// function stops it and waits for it to return.
func (w *Worker) startHeartbeat(ctx context.Context) (stop func()) {
	hbCtx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		w.heartbeatLoop(hbCtx)
	}()
	return func() {
		cancel()
		<-finished
	}
}

func (w *Worker) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.beat(ctx)
		}
	}
}

// beat refreshes the worker's registry row and extends the leases of the jobs it holds; the
// answer says which of them are lost or asked to cancel, and their handlers are told.
func (w *Worker) beat(ctx context.Context) {
	w.register(ctx)
	// Half the lease: a slow heartbeat still lands before the lease runs out.
	hctx, cancel := context.WithTimeout(ctx, w.cfg.Lease/2)
	defer cancel()
	leases := w.heldLeases()
	if len(leases) == 0 {
		return
	}
	res, err := w.c.Heartbeat(hctx, leases, w.cfg.Lease)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("lease heartbeat failed", "err", err, "jobs", len(leases))
		}
		return
	}
	w.applyHeartbeat(res)
}

// heldLeases returns the leases of the jobs the worker holds and has not lost.
func (w *Worker) heldLeases() []Lease {
	w.mu.Lock()
	defer w.mu.Unlock()
	leases := make([]Lease, 0, len(w.inflight))
	for _, h := range w.inflight {
		if !h.gone {
			leases = append(leases, h.job.Lease())
		}
	}
	return leases
}

// applyHeartbeat ends the handler contexts of jobs whose lease was lost (ErrLeaseLost) or that
// were asked to cancel (ErrCancelRequested); a job still waiting for a handler is marked, so the
// handler that takes it skips it or cancels at once.
func (w *Worker) applyHeartbeat(res HeartbeatResult) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range res.Lost {
		if h := w.inflight[id]; h != nil {
			h.gone = true
			if h.cancel != nil {
				h.cancel(ErrLeaseLost)
			}
		}
	}
	for _, id := range res.CancelRequested {
		if h := w.inflight[id]; h != nil {
			h.job.CancelRequested = true
			if h.cancel != nil {
				h.cancel(ErrCancelRequested)
			}
		}
	}
}
