package queue

import (
	"context"
	"time"

	"crawlq/internal/backoff"
)

func (w *Worker) claimLoop(ctx context.Context) {
	var lastPromote time.Time
	// Claims that fail wait 100 ms, doubling, at most a second: claims resume within about that of
	// the database coming back.
	retry := backoff.Policy{Base: 100 * time.Millisecond, Max: time.Second}
	failures := 0
	for ctx.Err() == nil {
		if w.cfg.MaxJobs > 0 && w.claimed.Load() >= int64(w.cfg.MaxJobs) {
			return
		}
		want := cap(w.ready)
		if w.cfg.MaxJobs > 0 {
			want = min(want, w.cfg.MaxJobs-int(w.claimed.Load()))
		}
		room := w.takeRoom(want)
		if room < min(want, max(1, cap(w.ready)/2)) {
			w.giveBack(room, false)
			select {
			case <-w.wake:
			case <-ctx.Done():
				return
			}
			continue
		}
		// The claim must not be cancelled by Run's context: a claim the server committed but whose
		// answer we dropped would leave its jobs leased to nobody until the lease expired, and the
		// rescue would count an attempt. So it gets its own timeout, and what it returns after a
		// stop is released at once.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		jobs, err := w.c.Claim(cctx, ClaimParams{Queue: w.cfg.Queue, Worker: w.cfg.ID, Limit: room, Lease: w.cfg.Lease})
		cancel()
		if err != nil || ctx.Err() != nil {
			w.giveBack(room, false)
			if ctx.Err() != nil {
				if len(jobs) > 0 {
					leases := make([]Lease, len(jobs))
					for i, j := range jobs {
						leases[i] = j.Lease()
					}
					w.releaseLeases(context.WithoutCancel(ctx), leases)
				}
				return
			}
			failures++
			d := retry.Delay(failures)
			w.log.Warn("claim failed; retrying", "err", err, "in", d)
			backoff.Sleep(ctx, d)
			continue
		}
		failures = 0
		w.hand(jobs, room, false)
		if len(jobs) < room && time.Since(lastPromote) > w.cfg.PollInterval/2 {
			lastPromote = time.Now()
			if n, err := w.c.Promote(ctx, 1000); err != nil && ctx.Err() == nil {
				w.log.Warn("promote failed", "err", err)
			} else if n > 0 {
				continue
			}
		}
		if len(jobs) == 0 {
			t := time.NewTimer(w.cfg.PollInterval)
			select {
			case <-t.C:
			case <-w.poke:
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
}
