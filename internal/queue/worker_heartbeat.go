package queue

import (
	"context"
	"time"
)

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

func (w *Worker) beat(ctx context.Context) {
	w.register(ctx)
	// Half the lease: a slow heartbeat still lands before the lease runs out.
	hctx, cancel := context.WithTimeout(ctx, w.cfg.Lease/2)
	defer cancel()
	w.mu.Lock()
	leases := make([]Lease, 0, len(w.inflight))
	for _, h := range w.inflight {
		if !h.gone {
			leases = append(leases, h.job.Lease())
		}
	}
	w.mu.Unlock()
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
