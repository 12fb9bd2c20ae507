package queue

import (
	"context"
	"time"

	"crawlq/internal/dbsqlc"
)

// A worker's row in crawlq_worker says it is live (LiveWorkers, which the dispatcher and
// operators read): Run writes it before its first claim, each heartbeat refreshes it, and Run
// deletes it on the way out. PruneWorkers (maintenance) deletes the rows of workers that died
// without that.

// register records the worker as live (or refreshes it); a failure is logged and the next
// heartbeat tries again, since the jobs' own leases, not this row, keep them safe.
func (w *Worker) register(ctx context.Context) {
	hctx, cancel := context.WithTimeout(ctx, w.cfg.Lease/2)
	defer cancel()
	if err := w.c.q.WorkerBeat(hctx, dbsqlc.WorkerBeatParams{ID: w.cfg.ID, Queue: w.cfg.Queue, Kind: w.cfg.Kind, JobsDone: w.succeeded.Load(), Now: w.c.now()}); err != nil && ctx.Err() == nil {
		w.log.Warn("worker heartbeat failed", "err", err)
	}
}

// unregister deletes the worker's row as Run returns; a failure is logged, and the row falls
// out of LiveWorkers' horizon and PruneWorkers deletes it.
func (w *Worker) unregister(ctx context.Context) {
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := w.c.q.WorkerGone(gctx, w.cfg.ID); err != nil {
		w.log.Warn("unregister worker", "err", err)
	}
}
