package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"crawlq/internal/dbsqlc"
)

// What the queue holds, without counting job rows: counts per queue and state, the oldest
// past-due job, and the live workers.

// QueueStats are one queue's counts.
type QueueStats struct {
	Queue string `json:"queue"`
	// Available counts due jobs waiting to run; Scheduled counts delayed ones (not yet due).
	Available int64 `json:"available"`
	Scheduled int64 `json:"scheduled"`
	Running   int64 `json:"running"`
	Succeeded int64 `json:"succeeded"`
	Cancelled int64 `json:"cancelled"`
	Dead      int64 `json:"dead"`
	// PastDue counts jobs whose run_at has passed and that no worker has started.
	PastDue int64 `json:"past_due"`
	// OldestPastDue is the age of the oldest past-due job (0 when none).
	OldestPastDue time.Duration `json:"oldest_past_due_ns"`
}

// Stats returns per-queue counts, sorted by queue. No job rows are counted: state counts come from
// the count tables that every state-changing statement appends its change to (first folding the
// pending changes), the oldest past-due age from a loose index scan of crawlq_job_claim (one probe
// per distinct priority), and the delayed-but-due jobs not yet promoted from a range of
// crawlq_job_scheduled, which promotion keeps short. So the cost does not grow with the number of
// jobs: at 10 million rows it is a handful of index probes.
func (c *Client) Stats(ctx context.Context) ([]QueueStats, error) {
	if err := c.q.FoldCounts(ctx); err != nil {
		return nil, fmt.Errorf("stats: fold counts: %w", err)
	}
	counts, err := c.q.ReadCounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	byQueue := map[string]*QueueStats{}
	get := func(q string) *QueueStats {
		s := byQueue[q]
		if s == nil {
			s = &QueueStats{Queue: q}
			byQueue[q] = s
		}
		return s
	}
	for _, r := range counts {
		s := get(r.Queue)
		switch State(r.State) {
		case StateAvailable:
			s.Available = r.N
		case StateScheduled:
			s.Scheduled = r.N
		case StateRunning:
			s.Running = r.N
		case StateSucceeded:
			s.Succeeded = r.N
		case StateCancelled:
			s.Cancelled = r.N
		case StateDead:
			s.Dead = r.N
		}
	}
	now := c.now()
	at, err := c.q.DatabaseNow(ctx, now)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	oldest := map[string]time.Time{}
	due, err := c.q.DueScheduled(ctx, now)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	for _, r := range due {
		// Due but not yet promoted: waiting to run like any available job.
		s := get(r.Queue)
		s.Scheduled -= r.N
		s.Available += r.N
		oldest[r.Queue] = r.Oldest
	}
	out := make([]QueueStats, 0, len(byQueue))
	for q, s := range byQueue {
		s.PastDue = s.Available // every available job is due and unstarted
		if s.Available > 0 {
			t, err := c.q.OldestAvailable(ctx, q)
			if err != nil {
				return nil, fmt.Errorf("stats: oldest in %s: %w", q, err)
			}
			if !t.IsZero() && (oldest[q].IsZero() || t.Before(oldest[q])) {
				oldest[q] = t
			}
		}
		if t := oldest[q]; !t.IsZero() && at.After(t) {
			s.OldestPastDue = at.Sub(t)
		}
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b QueueStats) int { return strings.Compare(a.Queue, b.Queue) })
	return out, nil
}

// Queues lists the queues that have or had jobs (from the state counts, not from job rows),
// folding pending count changes first: the fold also keeps crawlq_job_count_delta small where
// nothing else reads stats.
func (c *Client) Queues(ctx context.Context) ([]string, error) {
	return c.queues(ctx)
}

func (c *Client) queues(ctx context.Context) ([]string, error) {
	stats, err := c.Stats(ctx)
	if err != nil {
		return nil, err
	}
	qs := make([]string, len(stats))
	for i, s := range stats {
		qs[i] = s.Queue
	}
	return qs, nil
}

// LiveWorkers counts workers that heartbeated within horizon, by queue and kind ("lambda", "ecs",
// "process"), optionally for one queue. Dispatchers use it instead of eventually consistent ECS
// or Lambda listings.
func (c *Client) LiveWorkers(ctx context.Context, queue string, horizon time.Duration) (map[string]map[string]int, error) {
	rows, err := c.q.LiveWorkers(ctx, dbsqlc.LiveWorkersParams{Queue: queue, Now: c.now(), HorizonUs: horizon.Microseconds()})
	if err != nil {
		return nil, fmt.Errorf("live workers: %w", err)
	}
	out := map[string]map[string]int{}
	for _, r := range rows {
		if out[r.Queue] == nil {
			out[r.Queue] = map[string]int{}
		}
		out[r.Queue][r.Kind] = int(r.N)
	}
	return out, nil
}
