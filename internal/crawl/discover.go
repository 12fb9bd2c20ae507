package crawl

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/queue"
)

// Discovery: the pages a page found become page jobs of its run before that page is finished (see
// finish.go), each with its URL as once key so that a URL the run has already queued is skipped in
// the same statement, and with its run's priority (an adaptive run's pages: by expected change,
// priority.go). As many as this process has room for (queue.Reservation: idle handlers,
// and those its workers hold ahead) go to its own workers, already leased; the rest wait in the
// queue for any worker. A run with a page budget (max_pages) takes its new pages from the budget
// in a transaction that locks the budget row.

// discover adds the pages of run ri that a page found, before that page is finished (see the
// top of this file). Links this process knows the run has queued are dropped first.
func (c *Crawler) discover(ctx context.Context, ri *runInfo, found []pageArgs) error {
	found = c.seen.unknown(ri.id, found)
	if len(found) == 0 {
		return nil
	}
	pages, keys := distinctPages(ri.id, found)
	prios, err := c.rankPages(ctx, c.db, ri, pages)
	if err != nil {
		return fmt.Errorf("add pages: %w", err)
	}
	var added addedPages
	if ri.settings.MaxPages > 0 {
		err := c.inTx(ctx, func(tx pgx.Tx) (err error) {
			added, err = c.addBudgeted(ctx, tx, ri, pages, prios)
			return err
		})
		if err != nil {
			return err
		}
	} else {
		// One round trip, with a synchronous commit. (It once committed without waiting for its WAL
		// flush, on the grounds that the page's own completion, committed later, flushes it too. Not
		// across a database crash: the worker still holds the page, and completes it into the
		// restarted server's new WAL, while the pages it found were lost with the old, so the run
		// succeeded without them; make chaos's database restart caught one.)
		tx := c.cfg.Queue.NewTx()
		count, err := c.queuePages(tx, ri, pages, prios)
		if err != nil {
			tx.Discard()
			return fmt.Errorf("add pages: %w", err)
		}
		if err := tx.Send(ctx); err != nil {
			return fmt.Errorf("add pages: %w", err)
		}
		count(&added)
		c.handedOver(added.held)
	}
	c.seen.add(keys)
	if added.queued && c.cfg.OnEnqueue != nil {
		c.cfg.OnEnqueue(ri.queue)
	}
	return nil
}

// addedPages is what queuePages inserted.
type addedPages struct {
	n      int
	held   int  // handed to this process's own workers
	queued bool // some wait in the queue (not all were handed to this process)
}

// queuePages queues on tx the page jobs of run ri's new links (prios: their priorities, see
// pageJobs): as many as this process has room for, already leased to it (reservations, which tx
// ends when it is sent or discarded), the others for any worker to claim. The pages come first to
// the reservations, so ranked pages (rankPages) hand this process's workers the likeliest to have
// changed. The returned function reports what was inserted once tx has been sent.
func (c *Crawler) queuePages(tx *queue.Tx, ri *runInfo, pages []pageArgs, prios []int) (func(*addedPages), error) {
	ps := c.pageJobs(ri, pages, prios)
	var rs []*queue.Reservation
	mine := 0
	if c.cfg.Reserve != nil {
		rs = c.cfg.Reserve(ri.queue, len(ps))
		for i, r := range rs {
			n := min(r.Len(), len(ps)-mine)
			if n == 0 { // the shares' rounding: nothing left for it
				r.Cancel()
				continue
			}
			if err := tx.EnqueueHeld(r, ps[mine:mine+n]); err != nil {
				for _, r := range rs[i:] { // those before are the Tx's to end
					r.Cancel()
				}
				return nil, err
			}
			mine += n
		}
	}
	rest := ps[mine:]
	out := make([]queue.EnqueueResult, len(rest))
	if len(rest) > 0 {
		if err := tx.Enqueue(rest, 0, out); err != nil {
			return nil, err
		}
	}
	return func(a *addedPages) {
		for _, r := range rs {
			a.n += len(r.Jobs())
			a.held += len(r.Jobs())
		}
		for _, o := range out {
			if o.ID != 0 {
				a.n++
				a.queued = true
			}
		}
	}, nil
}

// seenKey is a URL (by hash) of a run: the key of the seen cache.
type seenKey struct {
	Run int64
	H   [16]byte
}

// distinctPages returns found without repeated URLs, in the order found, and their seen keys.
func distinctPages(run int64, found []pageArgs) ([]pageArgs, []seenKey) {
	keys := make([]seenKey, 0, len(found))
	had := make(map[seenKey]bool, len(found))
	pages := make([]pageArgs, 0, len(found))
	for _, p := range found {
		k := seenKeyOf(run, p.URL)
		if had[k] {
			continue
		}
		had[k] = true
		keys = append(keys, k)
		pages = append(pages, p)
	}
	return pages, keys
}

// pageJobs returns the page jobs of run ri for pages, each with its URL as once key, and with the
// priority prios gives it (rankPages), or the run's when prios is nil.
func (c *Crawler) pageJobs(ri *runInfo, pages []pageArgs, prios []int) []queue.EnqueueParams {
	ps := make([]queue.EnqueueParams, len(pages))
	for i, p := range pages {
		args, _ := json.Marshal(p)
		prio := ri.priority
		if prios != nil {
			prio = prios[i]
		}
		ps[i] = queue.EnqueueParams{Queue: ri.queue, Kind: KindPage, Args: args, Priority: prio,
			ParentID: ri.id, MaxAttempts: ri.settings.Retry.Attempts, OnceKey: p.URL}
	}
	return ps
}

// addBudgeted adds pages of run ri within tx (prios: their priorities, see pageJobs), at most what
// the run's page budget has left, the first pages first (ranked pages: the likeliest to have
// changed): the budget row is locked until commit, so concurrent pages of the run take from it
// one after the other, and only the pages actually added (not those already queued) are taken
// from it.
func (c *Crawler) addBudgeted(ctx context.Context, tx pgx.Tx, ri *runInfo, pages []pageArgs, prios []int) (addedPages, error) {
	var added addedPages
	left, err := dbsqlc.New(tx).LockRunBudget(ctx, ri.id)
	if err != nil {
		return added, fmt.Errorf("page budget: %w", err)
	}
	if left == 0 {
		return added, nil
	}
	if left < 0 || left > int64(len(pages)) {
		left = int64(len(pages))
	}
	out, err := c.cfg.Queue.EnqueueLimitedTx(ctx, tx, c.pageJobs(ri, pages, prios), int(left))
	if err != nil {
		return added, fmt.Errorf("add pages: %w", err)
	}
	for _, o := range out {
		if o.ID != 0 {
			added.n++
			added.queued = true
		}
	}
	if err := dbsqlc.New(tx).SpendRunBudget(ctx, dbsqlc.SpendRunBudgetParams{ID: ri.id, Pages: int64(added.n)}); err != nil {
		return added, fmt.Errorf("page budget: %w", err)
	}
	return added, nil
}

// addPages enqueues the start pages of run ri within tx, as many as its page budget allows.
func (c *Crawler) addPages(ctx context.Context, tx pgx.Tx, ri *runInfo, pages []pageArgs) (int, error) {
	list, _ := distinctPages(ri.id, pages)
	if len(list) == 0 {
		return 0, nil
	}
	prios, err := c.rankPages(ctx, dbsqlc.New(tx), ri, list)
	if err != nil {
		return 0, err
	}
	if ri.settings.MaxPages > 0 {
		added, err := c.addBudgeted(ctx, tx, ri, list, prios)
		return added.n, err
	}
	if _, err := c.cfg.Queue.EnqueueManyTx(ctx, tx, c.pageJobs(ri, list, prios)); err != nil {
		return 0, err
	}
	return len(list), nil
}
