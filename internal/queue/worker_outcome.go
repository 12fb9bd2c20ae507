package queue

import (
	"context"
	"errors"
	"time"

	"crawlq/internal/backoff"
	"crawlq/internal/db"
)

// finish runs a fenced write for j, then forgets the job. It retries while the database is
// unreachable, for as long as the job's lease token can still be valid: nobody takes the job
// from this worker before its lease has expired and a rescue has run, which needs the database
// too. So after an outage the worker records what its jobs did within a second or so of the
// database coming back, instead of leaving them to expire and be rescued (at the cost of an
// attempt) half a minute later.
func (w *Worker) finish(ctx context.Context, j *Job, write func(context.Context) error) {
	defer w.forget(j.ID)
	give := time.Now().Add(2 * w.cfg.Lease)
	for try := 1; ; try++ {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := write(wctx)
		cancel()
		if err == nil {
			return
		}
		if errors.Is(err, ErrLeaseLost) {
			w.lost.Add(1)
			return
		}
		// Only a fault of the database is worth waiting out; anything else gets a few tries.
		if ctx.Err() != nil || time.Now().After(give) || w.isStopped() || (try >= 5 && !db.IsTransient(err)) {
			w.log.Error("could not record job outcome; its lease will expire and it will be rescued", "job", j.ID, "err", err)
			w.unrecorded.Add(1)
			return
		}
		backoff.Sleep(ctx, writeRetry.Delay(try))
	}
}

// writeRetry is the wait between tries of an outcome write: 50 ms, doubling, at most a second, so
// that outcomes are recorded within about a second of the database coming back.
var writeRetry = backoff.Policy{Base: 50 * time.Millisecond, Max: time.Second}

func (w *Worker) forget(id int64) {
	w.mu.Lock()
	delete(w.inflight, id)
	w.mu.Unlock()
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

func (w *Worker) completeBatch(ctx context.Context, batch []Lease) {
	give := time.Now().Add(2 * w.cfg.Lease) // as long as the leases can be valid (see finish)
	for try := 1; ; try++ {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		lost, err := w.c.CompleteMany(wctx, batch)
		cancel()
		if err == nil {
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
			return
		}
		if ctx.Err() != nil || time.Now().After(give) {
			w.log.Error("could not record completions; their leases will expire and the jobs will be rescued", "n", len(batch), "err", err)
			w.unrecorded.Add(int64(len(batch)))
			return
		}
		backoff.Sleep(ctx, writeRetry.Delay(try))
	}
}
