package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/items"
	"crawlq/internal/queue"
)

// A page ends in two steps. First it adds the new pages it found (discover): its links become page
// jobs, with the URL as once key so that a URL the run has already queued is skipped in the same
// statement, and as many as this process has idle room for go to its own workers, already leased
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
	finishers     = 1      // batches in flight at once
	maxFinishing  = 256    // pages per batch
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
	})
}

// finishLoop commits batches of the pages waiting to finish.
func (c *Crawler) finishLoop() {
	defer c.finishers.Done()
	batch := make([]*finishReq, 0, maxFinishing)
	for {
		var r *finishReq
		select {
		case r = <-c.finishQ:
		case <-c.closed:
			return
		}
		batch = append(batch[:0], r)
	fill:
		for len(batch) < maxFinishing {
			select {
			case r := <-c.finishQ:
				batch = append(batch, r)
			default:
				break fill
			}
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

// markCancelled notes that run has been asked to cancel: its pages here finish without fetching.
func (c *Crawler) markCancelled(run int64) {
	c.mu.Lock()
	c.cancelled[run] = true
	c.mu.Unlock()
}

func (c *Crawler) isCancelled(run int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cancelled[run]
}

// pageStarted counts a page of run in as being handled in this process.
func (c *Crawler) pageStarted(run int64) {
	c.mu.Lock()
	c.active[run]++
	c.mu.Unlock()
}

// activePages is how many pages of run this process is handling.
func (c *Crawler) activePages(run int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active[run]
}

// pageEnded counts out a page that ended without committing (a retry, a snooze, a lost lease).
func (c *Crawler) pageEnded(run int64) {
	c.mu.Lock()
	if c.active[run]--; c.active[run] <= 0 {
		delete(c.active, run)
	}
	c.mu.Unlock()
}

// settle counts out the pages of a committed batch and returns the runs that may have just
// finished: no other page of theirs is being handled here.
//
// Skipping the others is safe: a page still being handled is a running job of the run, so the run
// is not finished; when it ends, either it commits (and its own batch settles, and checks if it is
// the last) or its job stays unfinished (retried, snoozed, held by another worker) and is finished
// later, by whoever then checks. Only the last page of a burst costs a check, not every batch.
func (c *Crawler) settle(batch []*finishReq) []*runInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range batch {
		if c.active[r.ri.id]--; c.active[r.ri.id] <= 0 {
			delete(c.active, r.ri.id)
		}
	}
	var check []*runInfo
	seen := map[int64]bool{}
	for _, r := range batch {
		id := r.ri.id
		if !seen[id] && c.active[id] == 0 {
			check = append(check, r.ri)
		}
		seen[id] = true
	}
	return check
}

// commitBatch runs one batch's transaction in one round trip: BEGIN, the pages' completions
// (fenced: a lost lease aborts the transaction), their stats and items, COMMIT. It returns the ids
// of pages whose lease was lost (then nothing was committed).
func (c *Crawler) commitBatch(ctx context.Context, batch []*finishReq) (lost map[int64]bool, err error) {
	leases := make([]queue.Lease, len(batch))
	type statKey struct {
		run  int64
		kind string
	}
	sums := map[statKey]*outcome{}
	var order []statKey
	var its []items.Item
	for i, r := range batch {
		leases[i] = r.job.Lease()
		its = append(its, r.items...)
		k := statKey{r.ri.id, r.o.kind}
		s := sums[k]
		if s == nil {
			s = &outcome{}
			sums[k] = s
			order = append(order, k)
		}
		s.pages, s.items, s.errors, s.retries, s.bytes = s.pages+r.o.pages, s.items+r.o.items, s.errors+r.o.errors, s.retries+r.o.retries, s.bytes+r.o.bytes
		s.n++
	}
	n := len(order)
	runs, pages, nItems, errs, retries, counts := make([]int64, n), make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
	bytes, kinds := make([]int64, n), make([]string, n)
	for i, k := range order {
		s := sums[k]
		runs[i], kinds[i], pages[i], nItems[i], errs[i], retries[i] = k.run, k.kind, int32(s.pages), int32(s.items), int32(s.errors), int32(s.retries)
		bytes[i], counts[i] = s.bytes, int32(s.n)
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	c.cfg.Queue.CompleteAllBatch(b, leases)
	b.Queue(sqlAddStats, runs, pages, nItems, bytes, errs, retries, kinds, counts).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var run int64
			var cancel bool
			if err := rows.Scan(&run, &cancel); err != nil {
				return err
			}
			if cancel {
				c.markCancelled(run)
			}
		}
		return rows.Err()
	})
	if len(its) > 0 {
		if err := c.cfg.TxSink.WriteBatch(b, its); err != nil {
			return nil, err
		}
	}
	b.Queue("COMMIT")
	if err := c.sendTx(ctx, b); err != nil {
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

// discover adds the pages of run ri that a page found, before that page is finished (see the
// top of this file). Links this process knows the run has queued are dropped first.
func (c *Crawler) discover(ctx context.Context, ri *runInfo, found []pageArgs) error {
	found = c.seen.unknown(ri.id, found)
	if len(found) == 0 {
		return nil
	}
	pages, keys := distinctPages(ri.id, found)
	var added addedPages
	if ri.settings.MaxPages > 0 {
		err := c.inTx(ctx, func(tx pgx.Tx) (err error) {
			added, err = c.addBudgeted(ctx, tx, ri, pages)
			return err
		})
		if err != nil {
			return err
		}
	} else {
		// One round trip. The commit does not wait for its WAL to reach disk: everything that
		// depends on these jobs commits later with the default synchronous commit (the page's own
		// completion; a child's completion or claim), and WAL is flushed in order, so those flush
		// this too. A database crash before then loses the pages together with the page that found
		// them, which runs again and finds them again.
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(sqlAsyncCommit)
		r, count, err := c.queuePages(b, ri, pages, 0)
		b.Queue("COMMIT")
		if err == nil {
			err = c.sendTx(ctx, b)
		}
		if err != nil {
			r.Cancel()
			return fmt.Errorf("add pages: %w", err)
		}
		r.Hand()
		count(&added)
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
	queued bool // some wait in the queue (not all were handed to this process)
}

// queuePages queues on b the page jobs of run ri's new links: as many as this process has idle
// room for, already leased to it (the reservation, which the caller ends with Hand or Cancel), the
// others for any worker to claim; with limit > 0 (a page budget), at most limit, all through the
// queue. The returned function reports what was inserted once b's results are read.
func (c *Crawler) queuePages(b *pgx.Batch, ri *runInfo, pages []pageArgs, limit int) (*queue.Reservation, func(*addedPages), error) {
	ps := c.pageJobs(ri, pages)
	var r *queue.Reservation
	mine := 0
	if limit == 0 && c.cfg.Reserve != nil {
		if r = c.cfg.Reserve(ri.queue, len(ps)); r != nil {
			mine = r.Len()
			if err := r.EnqueueBatch(b, ps[:mine]); err != nil {
				return r, nil, err
			}
		}
	}
	rest := ps[mine:]
	out := make([]queue.EnqueueResult, len(rest))
	if len(rest) > 0 {
		if err := c.cfg.Queue.EnqueueManyBatch(b, rest, limit, out); err != nil {
			return r, nil, err
		}
	}
	return r, func(a *addedPages) {
		if r != nil {
			a.n += len(r.Jobs())
		}
		for _, o := range out {
			if o.ID != 0 {
				a.n++
				a.queued = true
			}
		}
	}, nil
}

// sendTx sends b, which begins and commits a transaction, on a connection of its own; after an
// error it rolls back what is left of the transaction.
func (c *Crawler) sendTx(ctx context.Context, b *pgx.Batch) error {
	conn, err := c.cfg.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		rollback(conn)
		return err
	}
	return nil
}

// rollback ends conn's transaction, if any, after a failed batch; a connection that cannot is
// closed, so the pool drops it.
func rollback(conn *pgxpool.Conn) {
	if conn.Conn().PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		_ = conn.Conn().Close(ctx)
	}
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

// pageJobs returns the page jobs of run ri for pages, each with its URL as once key.
func (c *Crawler) pageJobs(ri *runInfo, pages []pageArgs) []queue.EnqueueParams {
	ps := make([]queue.EnqueueParams, len(pages))
	for i, p := range pages {
		args, _ := json.Marshal(p)
		ps[i] = queue.EnqueueParams{Queue: ri.queue, Kind: KindPage, Args: args, Priority: ri.priority,
			ParentID: ri.id, MaxAttempts: ri.settings.Retry.Attempts, OnceKey: p.URL}
	}
	return ps
}

// addBudgeted adds pages of run ri within tx, at most what the run's page budget has left: the
// budget row is locked until commit, so concurrent pages of the run take from it one after the
// other, and only the pages actually added (not those already queued) are taken from it.
func (c *Crawler) addBudgeted(ctx context.Context, tx pgx.Tx, ri *runInfo, pages []pageArgs) (addedPages, error) {
	var added addedPages
	var left int64
	if err := tx.QueryRow(ctx, sqlLockBudget, ri.id).Scan(&left); err != nil {
		return added, fmt.Errorf("page budget: %w", err)
	}
	if left == 0 {
		return added, nil
	}
	if left < 0 || left > int64(len(pages)) {
		left = int64(len(pages))
	}
	b := &pgx.Batch{}
	_, count, err := c.queuePages(b, ri, pages, int(left))
	if err != nil {
		return added, err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return added, fmt.Errorf("add pages: %w", err)
	}
	count(&added)
	if _, err := tx.Exec(ctx, sqlSpendBudget, ri.id, added.n); err != nil {
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
	if ri.settings.MaxPages > 0 {
		added, err := c.addBudgeted(ctx, tx, ri, list)
		return added.n, err
	}
	if _, err := c.cfg.Queue.EnqueueManyTx(ctx, tx, c.pageJobs(ri, list)); err != nil {
		return 0, err
	}
	return len(list), nil
}
