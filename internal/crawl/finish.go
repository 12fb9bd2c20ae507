package crawl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/items"
	"crawlq/internal/queue"
)

// A page ends in two steps. First it adds the new pages it found (discover.go): its links become page
// jobs, with the URL as once key so that a URL the run has already queued is skipped in the same
// statement, and as many as this process has room for go to its own workers, already leased
// (queue.Reservation). That commits while the page is still running, so the run always has an
// unfinished job while pages may still be added to it: completion detection relies on this. Then
// the page is finished in a group commit: the pages of this process that are ready wait for one
// transaction that completes them (fenced by their leases) and records their stats and items. A
// page whose lease turns out lost makes the batch roll back and go again without it.
//
// Discovery is on the crawl's critical path (a paginated listing is a chain of pages each found by
// the one before), so it takes one round trip, sent by the page's own handler. The finishing
// batches are not: one finisher lets them grow with the load, and fewer, larger transactions cost
// the database less per page.

const (
	finishers    = 1   // batches in flight at once
	maxFinishing = 256 // pages per batch
	// A batch short of full waits up to lingerFor for pages still being handled here
	// (finishLoop): where pages finish a few dozen at a time (a chain of listing pages, each
	// handing out 20), one transaction for the pages of several hops costs the database far less
	// than one for each. On the chain bench site a batch holds ~80 pages (4 hops); a page's
	// completion waits at most lingerFor more, which a real site's fetch time dwarfs, and its
	// handler holds no connection meanwhile.
	lingerBatch   = maxFinishing
	lingerFor     = 15 * time.Millisecond
	seenCacheSize = 200000 // links remembered as queued per generation (seen.go): ~25 MB at most
)

// finishReq is one page waiting to be finished.
type finishReq struct {
	job    *queue.Job
	ri     *runInfo
	o      outcome
	follow []pageArgs   // links found, added by discover before the page joins a batch
	items  []items.Item // written in the batch's transaction (Config.TxSink)
	done   chan error
}

// finishPage finishes a page in the next batch and returns queue.ErrCompleted once it committed.
func (c *Crawler) finishPage(ctx context.Context, job *queue.Job, ri *runInfo, o outcome, follow []pageArgs) error {
	return c.finish(ctx, &finishReq{job: job, ri: ri, o: o, follow: follow})
}

// finishPageItems is finishPage with the page's items, written in the same transaction.
func (c *Crawler) finishPageItems(ctx context.Context, job *queue.Job, ri *runInfo, o outcome, follow []pageArgs, its []items.Item) error {
	return c.finish(ctx, &finishReq{job: job, ri: ri, o: o, follow: follow, items: its})
}

func (c *Crawler) finish(ctx context.Context, r *finishReq) error {
	c.finishOnce.Do(func() {
		c.finishQ = make(chan *finishReq, maxFinishing*finishers)
		c.finishers.Add(finishers)
		for range finishers {
			go c.finishLoop()
		}
	})
	if err := c.discover(ctx, r.ri, r.follow); err != nil {
		return err
	}
	r.done = make(chan error, 1)
	select {
	case c.finishQ <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closed:
		return ErrClosed
	}
	// Wait for the batch even if ctx ends meanwhile: it may commit, and the worker must not report
	// on the job before knowing. The batch has its own timeout.
	select {
	case err := <-r.done:
		if err != nil {
			return err
		}
		return queue.ErrCompleted
	case <-c.finishersDone:
		// Closed with this page still queued: it was not finished (its lease will be released
		// or expire, and it runs again).
		select {
		case err := <-r.done:
			if err != nil {
				return err
			}
			return queue.ErrCompleted
		default:
			return ErrClosed
		}
	}
}

// Close stops the crawler's finishers once the pages already handed to them are done. Call it
// after the workers using the crawler have stopped; later pages get ErrClosed.
func (c *Crawler) Close() {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.finishers.Wait()
		close(c.finishersDone)
		c.closeBrowsers()
	})
}

// finishLoop commits batches of the pages waiting to finish.
func (c *Crawler) finishLoop() {
	defer c.finishers.Done()
	batch := make([]*finishReq, 0, maxFinishing)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		var r *finishReq
		select {
		case r = <-c.finishQ:
		case <-c.closed:
			return
		}
		batch = append(batch[:0], r)
		lingering := false
	fill:
		for len(batch) < maxFinishing {
			select {
			case r := <-c.finishQ:
				batch = append(batch, r)
				continue
			default:
			}
			// Nothing else is waiting. A small batch waits a moment for the pages still being
			// handled here: the pages a listing page handed out finish within milliseconds of each
			// other, and one transaction for all of them costs the database far less than one each.
			if len(batch) >= lingerBatch || !c.othersHandled(len(batch)) {
				break
			}
			if !lingering {
				lingering = true
				linger.Reset(lingerFor)
			}
			select {
			case r := <-c.finishQ:
				batch = append(batch, r)
			case <-linger.C:
				lingering = false
				break fill
			case <-c.closed:
				break fill
			}
		}
		if lingering {
			linger.Stop()
		}
		c.finishBatch(batch)
	}
}

// finishBatch commits a batch, redoing it without pages whose lease was lost.
func (c *Crawler) finishBatch(batch []*finishReq) {
	for len(batch) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		lost, err := c.commitBatch(ctx, batch)
		cancel()
		if err != nil && len(batch) > 1 && errors.Is(err, items.ErrInvalidItem) {
			// The database refused one page's items: finish the pages one by one, so only that
			// page fails.
			for _, r := range batch {
				c.finishBatch([]*finishReq{r})
			}
			return
		}
		if err != nil {
			for _, r := range batch {
				r.done <- err
			}
			return
		}
		if len(lost) == 0 {
			check := c.settle(batch)
			for _, r := range batch {
				r.done <- nil
			}
			for _, ri := range check {
				c.finishCheck(context.Background(), ri.id)
			}
			return
		}
		keep := batch[:0]
		for _, r := range batch {
			if lost[r.job.ID] {
				r.done <- fmt.Errorf("complete page job %d: %w", r.job.ID, queue.ErrLeaseLost)
			} else {
				keep = append(keep, r)
			}
		}
		batch = keep
	}
}

// commitBatch runs one batch's transaction in one round trip (a queue.Tx): the pages' completions
// (fenced: a lost lease commits nothing), their stats and items. It returns the ids of pages whose
// lease was lost (then nothing was committed).
func (c *Crawler) commitBatch(ctx context.Context, batch []*finishReq) (lost map[int64]bool, err error) {
	leases := make([]queue.Lease, len(batch))
	type statKey struct {
		run  int64
		kind string
	}
	sums := map[statKey]*outcome{}
	var order []statKey
	sum := func(k statKey) *outcome { // the batch's row for k, in the order first seen
		s := sums[k]
		if s == nil {
			s = &outcome{}
			sums[k] = s
			order = append(order, k)
		}
		return s
	}
	var its []items.Item
	for i, r := range batch {
		leases[i] = r.job.Lease()
		its = append(its, r.items...)
		s := sum(statKey{r.ri.id, r.o.kind})
		s.pages, s.items, s.errors, s.retries, s.bytes = s.pages+r.o.pages, s.items+r.o.items, s.errors+r.o.errors, s.retries+r.o.retries, s.bytes+r.o.bytes
		s.n++
		for _, l := range r.o.lost.kinds() {
			sum(statKey{r.ri.id, l.kind}).n += l.n
		}
	}
	n := len(order)
	st := dbsqlc.AddRunStatsParams{RunIds: make([]int64, n), Kinds: make([]string, n), Pages: make([]int32, n),
		Items: make([]int32, n), Errors: make([]int32, n), Retries: make([]int32, n), Bytes: make([]int64, n), Counts: make([]int32, n)}
	for i, k := range order {
		s := sums[k]
		st.RunIds[i], st.Kinds[i], st.Pages[i], st.Items[i], st.Errors[i], st.Retries[i] = k.run, k.kind, int32(s.pages), int32(s.items), int32(s.errors), int32(s.retries)
		st.Bytes[i], st.Counts[i] = s.bytes, int32(s.n)
	}
	tx := c.cfg.Queue.NewTx()
	tx.Complete(leases)
	dbsqlc.QueueMany(tx, (*dbsqlc.Queries).AddRunStats, st, func(rows []dbsqlc.AddRunStatsRow) error {
		for _, r := range rows {
			if r.CancelRequested {
				c.markCancelled(r.RunID)
			}
		}
		return nil
	})
	if len(its) > 0 {
		if err := c.cfg.TxSink.WriteBatch(tx, its); err != nil {
			return nil, err
		}
	}
	if err := queueStates(tx, batch, c.clk.Now()); err != nil {
		tx.Discard()
		return nil, err
	}
	if err := tx.Send(ctx); err != nil {
		var ll *queue.LeaseLostError
		if errors.As(err, &ll) {
			lost = make(map[int64]bool, len(ll.IDs))
			for _, id := range ll.IDs {
				lost[id] = true
			}
			return lost, nil
		}
		return nil, fmt.Errorf("finish pages: %w", err)
	}
	return nil, nil
}
