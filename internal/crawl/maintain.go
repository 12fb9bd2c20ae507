package crawl

import (
	"context"
	"fmt"
	"time"

	"crawlq/internal/dbsqlc"
)

// What a finished run leaves behind, and when it may go. A finished run keeps its row (with its
// final stats) and its items; its once keys, stored robots.txt copies, retired sessions and stat
// rows serve only a live run. They may go once the run is finished and can never run again: a
// redrive brings back dead jobs only, and a redriven page would find links the run already
// fetched, which only the once keys stop from being fetched again. So a run is purged only when it has no unfinished and
// no dead job (queue.Client.Settled, re-checked by the delete itself): a run with dead pages keeps
// everything until those are redriven or removed by the dead-job retention, whichever comes first.
// Stat rows may go because dbsqlc.FinishRun folded them into the run row; a reopened run (not purged,
// since it had dead jobs) still has them.

// PurgeCandidates returns up to limit runs that finished before `before` and are not purged yet,
// oldest first.
func (c *Crawler) PurgeCandidates(ctx context.Context, before time.Time, limit int) ([]int64, error) {
	ids, err := c.db.PurgeCandidates(ctx, dbsqlc.PurgeCandidatesParams{Before: before, MaxRuns: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list runs to purge: %w", err)
	}
	return ids, nil
}

// Purged is what one PurgeRun call did.
type Purged struct {
	OnceKeys, Robots, Sessions, Stats int      // rows deleted
	Settled                           bool     // the run has no unfinished and no dead job (else nothing was deleted)
	Done                              bool     // nothing is left: the run is marked purged
	After                             [16]byte // the once key the next call goes on after
}

// PurgeRun deletes up to limit rows of each kind a finished, settled run leaves behind (once keys
// after key `after`, robots.txt copies, retired sessions, stat rows) and marks the run purged once none is left. A
// run that is not settled (it has dead jobs, or is live again) is left alone. Call it again with
// the returned After until Done.
func (c *Crawler) PurgeRun(ctx context.Context, run int64, after [16]byte, limit int) (Purged, error) {
	p := Purged{After: after}
	ok, err := c.cfg.Queue.Settled(ctx, run)
	if err != nil || !ok {
		return p, err
	}
	p.Settled = true
	if p.OnceKeys, p.After, err = c.cfg.Queue.DeleteOnceKeys(ctx, run, after, limit); err != nil {
		return p, err
	}
	n, err := c.db.DeleteRunRobots(ctx, dbsqlc.DeleteRunRobotsParams{RunID: run, MaxRows: int32(limit)})
	if err != nil {
		return p, fmt.Errorf("delete robots.txt copies of run %d: %w", run, err)
	}
	p.Robots = int(n)
	if n, err = c.db.DeleteRunSessions(ctx, dbsqlc.DeleteRunSessionsParams{RunID: run, MaxRows: int32(limit)}); err != nil {
		return p, fmt.Errorf("delete retired sessions of run %d: %w", run, err)
	}
	p.Sessions = int(n)
	if n, err = c.db.DeleteRunStats(ctx, dbsqlc.DeleteRunStatsParams{RunID: run, MaxRows: int32(limit)}); err != nil {
		return p, fmt.Errorf("delete stat rows of run %d: %w", run, err)
	}
	p.Stats = int(n)
	if p.OnceKeys == limit || p.Robots == limit || p.Sessions == limit || p.Stats == limit {
		return p, nil // more left: the next call goes on
	}
	if err := c.db.MarkRunPurged(ctx, run); err != nil {
		return p, fmt.Errorf("mark run %d purged: %w", run, err)
	}
	p.Done = true
	return p, nil
}

// PruneDomains deletes up to a chunk of politeness rows idle since before `before`, walking the
// table in host order from after host `after` (see dbsqlc.PruneDomains). It returns where the
// next call should start ("" once the walk reached the end) and how many rows it deleted.
func (c *Crawler) PruneDomains(ctx context.Context, after string, before time.Time, chunk int) (next string, deleted int, err error) {
	row, err := c.db.PruneDomains(ctx, dbsqlc.PruneDomainsParams{AfterHost: after, IdleBefore: before, MaxHosts: int32(chunk)})
	if err != nil {
		return after, 0, fmt.Errorf("prune politeness rows: %w", err)
	}
	next = row.LastHost
	if row.Hosts < int64(chunk) {
		next = ""
	}
	return next, int(row.Deleted), nil
}
