package queue

import (
	"context"
	"time"

	"crawlq/internal/backoff"
	"crawlq/internal/clock"
)

// claimRetry is the wait after a claim failed: 100 ms, doubling, at most a second, so claims
// resume within about that of the database coming back.
var claimRetry = backoff.Policy{Base: 100 * time.Millisecond, Max: time.Second}

// claimLoop fills the ready buffer until ctx ends or MaxJobs have been claimed. It claims when at
// least half the buffer is free (or all that MaxJobs leaves), promotes scheduled jobs when a claim
// came back short, and waits for a poke or the poll interval when it found nothing.
func (w *Worker) claimLoop(ctx context.Context) {
	var sincePromote clock.Stopwatch // paces promotion in wall time; zero: promote at the first chance
	failures := 0
	for ctx.Err() == nil {
		want, ok := w.claimWant()
		if !ok {
			return
		}
		room := w.takeRoom(want)
		if room < min(want, max(1, w.cfg.BatchSize/2)) {
			w.giveBack(room, false)
			if !w.waitForRoom(ctx) {
				return
			}
			continue
		}
		jobs, err := w.claim(ctx, room)
		if err != nil || ctx.Err() != nil {
			w.giveBack(room, false)
			if ctx.Err() != nil {
				// Claimed as the worker stopped: nobody will run them, so they go back at once.
				w.releaseLeases(context.WithoutCancel(ctx), leasesOf(jobs))
				return
			}
			failures++
			d := claimRetry.Delay(failures)
			w.log.Warn("claim failed; retrying", "err", err, "in", d)
			backoff.Sleep(ctx, d)
			continue
		}
		failures = 0
		w.hand(jobs, room, false)
		if len(jobs) < room && sincePromote.Elapsed() > w.cfg.PollInterval/2 {
			sincePromote = clock.StartStopwatch()
			if w.promote(ctx) {
				continue
			}
		}
		if len(jobs) == 0 {
			w.waitForPoll(ctx)
		}
	}
}

// claimWant is how many jobs the next claim asks for: BatchSize, or what is left of
// MaxJobs. It reports false once MaxJobs have been claimed.
func (w *Worker) claimWant() (int, bool) {
	want := w.cfg.BatchSize
	if w.cfg.MaxJobs > 0 {
		left := w.cfg.MaxJobs - int(w.claimed.Load())
		if left <= 0 {
			return 0, false
		}
		want = min(want, left)
	}
	return want, true
}

// claim claims up to room jobs. The claim must not be cancelled by Run's context: a claim the
// server committed but whose answer we dropped would leave its jobs leased to nobody until the
// lease expired, and the rescue would count an attempt. So it gets its own timeout, and what it
// returns after a stop is released at once (see claimLoop).
func (w *Worker) claim(ctx context.Context, room int) ([]*Job, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return w.c.Claim(cctx, ClaimParams{Queue: w.cfg.Queue, Worker: w.cfg.ID, Limit: room, Lease: w.cfg.Lease})
}

// promote makes up to 1000 scheduled jobs that are now due available, and reports whether it made
// any, so the claim loop claims again at once.
func (w *Worker) promote(ctx context.Context) bool {
	n, err := w.c.Promote(ctx, 1000)
	if err != nil && ctx.Err() == nil {
		w.log.Warn("promote failed", "err", err)
		return false
	}
	return n > 0
}

// waitForRoom waits until a handler or a reservation frees room in the ready buffer; it reports
// false when ctx ended first.
func (w *Worker) waitForRoom(ctx context.Context) bool {
	select {
	case <-w.wake:
		return true
	case <-ctx.Done():
		return false
	}
}

// waitForPoll waits out the poll interval after a claim found nothing, or less if the worker is
// poked or ctx ends.
func (w *Worker) waitForPoll(ctx context.Context) {
	t := time.NewTimer(w.cfg.PollInterval)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.poke:
	case <-ctx.Done():
	}
}

// leasesOf returns the leases of jobs.
func leasesOf(jobs []*Job) []Lease {
	leases := make([]Lease, len(jobs))
	for i, j := range jobs {
		leases[i] = j.Lease()
	}
	return leases
}
