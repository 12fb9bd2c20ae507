package crawl

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/urlx"
)

// ErrNothingToRedrive is returned by Redrive for a run that has no dead page to retry.
var ErrNothingToRedrive = errors.New("crawl: run has no dead pages to redrive")

// ErrRunLive is returned by Redrive for a run that has not finished.
var ErrRunLive = errors.New("crawl: run has not finished")

// Redrive retries the dead pages of a run that ended incomplete or failed: in one transaction the
// pages are queued again with a fresh attempt budget, the run reopens (running), and its stats
// count the pages' last attempts as retries rather than errors (a page that then succeeds is no
// error; one that dies again is counted again when the run finishes). The run then
// finishes again, exactly once, when they and the pages they find are done. URLs the run already
// fetched are not fetched again: their once keys stay used. It returns how many pages it queued.
//
// A redrive is the operator saying "try again now": the pauses of the dead pages' hosts are
// cleared in the same transaction (each said in the process and run logs), so the pages are
// fetched at once rather than wait out a pause, in whichever process (pagePaused), and a host
// still down starts a new streak with its whole down limit. Other runs' pages of those hosts
// probe them on their own schedule.
func (c *Crawler) Redrive(ctx context.Context, runID int64) (int, error) {
	tx, err := c.cfg.Pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("redrive run %d: %w", runID, err)
	}
	defer tx.Rollback(ctx)
	db := c.db.WithTx(tx)
	prev, err := db.ReopenRun(ctx, runID)
	if errors.Is(err, pgx.ErrNoRows) {
		r, gerr := c.Get(ctx, runID)
		switch {
		case gerr != nil:
			return 0, gerr
		case !r.Finished():
			return 0, fmt.Errorf("redrive run %d (%s): %w", runID, r.State, ErrRunLive)
		default:
			return 0, fmt.Errorf("redrive run %d (%s): %w", runID, r.State, ErrNothingToRedrive)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("redrive run %d: %w", runID, err)
	}
	origins, err := db.RunDeadPageOrigins(ctx, dbsqlc.RunDeadPageOriginsParams{RunID: runID, Kind: KindPage})
	if err != nil {
		return 0, fmt.Errorf("redrive run %d: %w", runID, err)
	}
	cleared, err := clearPauses(ctx, db, originHosts(origins))
	if err != nil {
		return 0, fmt.Errorf("redrive run %d: %w", runID, err)
	}
	n, err := c.cfg.Queue.RedriveParentTx(ctx, tx, runID, KindPage)
	if err != nil {
		return 0, fmt.Errorf("redrive run %d: %w", runID, err)
	}
	if n == 0 {
		return 0, fmt.Errorf("redrive run %d (%s): %w", runID, prev, ErrNothingToRedrive)
	}
	if err := db.RetryRedriven(ctx, dbsqlc.RetryRedrivenParams{RunID: runID, Redriven: int64(n)}); err != nil {
		return 0, fmt.Errorf("redrive run %d: %w", runID, err)
	}
	q, err := db.RunQueue(ctx, runID)
	if err != nil {
		return 0, fmt.Errorf("redrive run %d: %w", runID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("redrive run %d: %w", runID, err)
	}
	c.forgetRun(runID)
	c.log.Info("run reopened: its dead pages are queued again", "run", runID, "was", prev, "pages", n)
	for _, h := range cleared {
		c.health.forget(h.Host)
		c.log.Info("redrive: a host's pause cleared: its pages are fetched now", "run", runID, "host", h.Host,
			"down_since", h.WasDownSince, "was_paused_until", h.WasPausedUntil)
		c.pageLog().HostPauseCleared(ctx, runID, c.clk.Now(), h.Host, h.WasDownSince)
	}
	if c.cfg.OnEnqueue != nil {
		c.cfg.OnEnqueue(q)
	}
	return n, nil
}

// originHosts returns the hosts of origins (each scheme://authority), each once, as pages key
// their host's row (urlx.Host).
func originHosts(origins []string) []string {
	seen := map[string]bool{}
	var hosts []string
	for _, o := range origins {
		if h := urlx.Host(o + "/"); h != "" && !seen[h] {
			seen[h] = true
			hosts = append(hosts, h)
		}
	}
	return hosts
}
