package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/items"
	"crawlq/internal/queue"
)

// Finishing pages is group-committed: the pages of this process that are ready to finish wait for
// one transaction that marks all their links seen, enqueues the new ones, records their stats and
// completes them (fenced by their leases). Each page's links still commit together with its
// completion, which is what completion detection relies on; a page whose lease turns out lost
// makes the batch roll back and go again without it. One transaction per batch instead of per page
// is what lets a crawl go at thousands of pages a second.
//
// Pages with links to add ("branch" pages, after dropping links this process knows are seen) have
// a finisher of their own: the crawl's frontier grows only through them, so a listing page must
// not wait behind a batch of item pages. One finisher for the other ("leaf") pages lets their
// batches grow with the load: fewer, larger transactions cost the database less per page.

const (
	leafFinishers = 1      // batches in flight at once for pages without links to add
	maxFinishing  = 256    // pages per batch
	seenCacheSize = 200000 // links remembered as seen per generation (seen.go): ~25 MB at most
)

// finishReq is one page waiting to be finished.
type finishReq struct {
	job    *queue.Job
	ri     *runInfo
	o      outcome
	follow []pageArgs
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
		c.finishBranch = make(chan *finishReq, maxFinishing)
		c.finishLeaf = make(chan *finishReq, maxFinishing*leafFinishers)
		c.finishers.Add(1 + leafFinishers)
		go c.finishLoop(c.finishBranch)
		for range leafFinishers {
			go c.finishLoop(c.finishLeaf)
		}
	})
	r.done = make(chan error, 1)
	r.follow = c.seen.unknown(r.ri.id, r.follow)
	lane := c.finishLeaf
	if len(r.follow) > 0 {
		lane = c.finishBranch
	}
	select {
	case lane <- r:
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

// finishLoop commits batches of the pages waiting in lane. Lanes are kept apart so that a branch
// page's batch stays small and quick.
func (c *Crawler) finishLoop(lane chan *finishReq) {
	defer c.finishers.Done()
	batch := make([]*finishReq, 0, maxFinishing)
	for {
		var r *finishReq
		select {
		case r = <-lane:
		case <-c.closed:
			return
		}
		batch = append(batch[:0], r)
	fill:
		for len(batch) < maxFinishing {
			select {
			case r := <-lane:
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
		res, lost, err := c.commitBatch(ctx, batch)
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
			check := c.settle(batch, res)
			for _, r := range batch {
				r.done <- nil
			}
			for _, ri := range check {
				c.finishCheck(context.Background(), ri.id)
			}
			for q := range res.queued {
				if c.cfg.OnEnqueue != nil {
					c.cfg.OnEnqueue(q)
				}
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

// batchResult is what a committed batch added: pages per run, and the queues that got pages
// waiting for a claim (rather than handed to this process's workers).
type batchResult struct {
	added  map[int64]int
	queued map[string]bool
}

// pageStarted counts a page of run in as being handled in this process.
func (c *Crawler) pageStarted(run int64) {
	c.mu.Lock()
	c.active[run]++
	c.mu.Unlock()
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
// finished: the batch added nothing to them and no other page of theirs is being handled here.
//
// Skipping the others is safe: a page still being handled is a running job of the run, so the run
// is not finished; when it ends, either it commits (and its own batch settles, and checks if it is
// the last) or its job stays unfinished (retried, snoozed, held by another worker) and is finished
// later, by whoever then checks. Only the last page of a burst costs a check, not every batch.
func (c *Crawler) settle(batch []*finishReq, res batchResult) []*runInfo {
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
		if !seen[id] && res.added[id] == 0 && c.active[id] == 0 {
			check = append(check, r.ri)
		}
		seen[id] = true
	}
	return check
}

// commitBatch runs one batch's transaction in two round trips: statements of several packages
// go in one pgx batch each. It returns what the batch added, or the ids of pages whose lease was
// lost (then nothing was committed).
func (c *Crawler) commitBatch(ctx context.Context, batch []*finishReq) (res batchResult, lost map[int64]bool, err error) {
	conn, err := c.cfg.Pool.Acquire(ctx)
	if err != nil {
		return batchResult{}, nil, fmt.Errorf("finish pages: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			rollback(conn)
		}
		conn.Release()
	}()
	n := len(batch)
	leases := make([]queue.Lease, n)
	var adds []pageAdd
	for i, r := range batch {
		leases[i] = r.job.Lease()
		for _, p := range r.follow {
			adds = append(adds, pageAdd{ri: r.ri, page: p})
		}
	}
	links := newLinkSet(adds)

	// Round trip 1: begin, complete the pages (fenced by their leases), record their stats and
	// items, mark their links seen. Round trip 2 then only enqueues the new pages and commits, so
	// a page with links waits as little as possible between the two.
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	var lostIDs []int64
	c.cfg.Queue.CompleteManyBatch(b, leases, &lostIDs)
	runs, pages, nItems, errs, retries := make([]int64, n), make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
	bytes, kinds := make([]int64, n), make([]string, n)
	var its []items.Item
	for i, r := range batch {
		runs[i], pages[i], nItems[i], errs[i], retries[i] = r.ri.id, int32(r.o.pages), int32(r.o.items), int32(r.o.errors), int32(r.o.retries)
		bytes[i], kinds[i] = r.o.bytes, r.o.kind
		its = append(its, r.items...)
	}
	b.Queue(sqlAddStats, runs, pages, nItems, bytes, errs, retries, kinds)
	if len(its) > 0 {
		if err := c.cfg.TxSink.WriteBatch(b, its); err != nil {
			return batchResult{}, nil, err
		}
	}
	var fresh []seenKey
	links.queueSeen(b, &fresh)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return batchResult{}, nil, fmt.Errorf("finish pages: %w", err)
	}
	if len(lostIDs) > 0 {
		lost = make(map[int64]bool, len(lostIDs))
		for _, id := range lostIDs {
			lost[id] = true
		}
		return batchResult{}, lost, nil
	}
	todo, err := c.grant(ctx, conn, links.newPages(fresh))
	if err != nil {
		return batchResult{}, nil, err
	}

	// Round trip 2: enqueue the new pages (as many as this process has idle room for already
	// leased to it) and commit.
	b = &pgx.Batch{}
	ps, added := c.pageJobs(todo)
	res = batchResult{added: added, queued: map[string]bool{}}
	var held []*queue.Reservation
	defer func() {
		for _, r := range held {
			if committed {
				r.Hand()
			} else {
				r.Cancel()
			}
		}
	}()
	queued := ps[:0:0]
	for len(ps) > 0 {
		q := ps[0].Queue
		end := 1
		for end < len(ps) && ps[end].Queue == q {
			end++
		}
		group := ps[:end]
		ps = ps[end:]
		if c.cfg.Reserve != nil {
			if r := c.cfg.Reserve(q, len(group)); r != nil {
				held = append(held, r)
				if err := r.EnqueueBatch(b, group[:r.Len()]); err != nil {
					return batchResult{}, nil, err
				}
				group = group[r.Len():]
			}
		}
		queued = append(queued, group...)
		if len(group) > 0 {
			res.queued[q] = true
		}
	}
	if err := c.cfg.Queue.EnqueueManyBatch(b, queued, make([]queue.EnqueueResult, len(queued))); err != nil {
		return batchResult{}, nil, err
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return batchResult{}, nil, fmt.Errorf("finish pages: %w", err)
	}
	committed = true
	c.seen.add(links.byKey)
	return res, nil, nil
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

// pageAdd is a page to enqueue for a run.
type pageAdd struct {
	ri   *runInfo
	page pageArgs
}

// seenKey is a URL (by hash) of a run's seen set.
type seenKey struct {
	Run int64
	H   pgtype.UUID
}

// linkSet is the links found by a set of pages, deduplicated per run.
type linkSet struct {
	byKey  map[seenKey]pageAdd
	runIDs []int64
	hashes []pgtype.UUID
}

func newLinkSet(adds []pageAdd) *linkSet {
	l := &linkSet{byKey: make(map[seenKey]pageAdd, len(adds))}
	for _, a := range adds {
		k := seenKeyOf(a.ri.id, a.page.URL)
		if _, dup := l.byKey[k]; dup {
			continue
		}
		l.byKey[k] = a
		l.runIDs = append(l.runIDs, k.Run)
		l.hashes = append(l.hashes, k.H)
	}
	return l
}

// queueSeen queues on b the statement that marks the links seen; *fresh receives those that were
// not seen before.
func (l *linkSet) queueSeen(b *pgx.Batch, fresh *[]seenKey) {
	if len(l.runIDs) == 0 {
		return
	}
	b.Queue(sqlSeenMany, l.runIDs, l.hashes).Query(func(rows pgx.Rows) error {
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[seenKey])
		if err != nil {
			return fmt.Errorf("mark seen: %w", err)
		}
		*fresh = got
		return nil
	})
}

// newPages groups the fresh links by run, in the order they were found.
func (l *linkSet) newPages(fresh []seenKey) []runPages {
	var out []runPages
	at := map[int64]int{}
	for _, f := range fresh {
		a, ok := l.byKey[f]
		if !ok {
			continue
		}
		i, ok := at[f.Run]
		if !ok {
			i = len(out)
			at[f.Run] = i
			out = append(out, runPages{ri: a.ri})
		}
		out[i].pages = append(out[i].pages, a.page)
	}
	return out
}

// runPages is the new pages of one run.
type runPages struct {
	ri    *runInfo
	pages []pageArgs
}

// grant trims each run's new pages to what is left of its page budget (runs with max_pages take
// a round trip each; the others have no budget).
func (c *Crawler) grant(ctx context.Context, db queue.DB, todo []runPages) ([]runPages, error) {
	for i := range todo {
		t := &todo[i]
		if t.ri.settings.MaxPages <= 0 {
			continue
		}
		var granted int64
		err := db.QueryRow(ctx, sqlTakeBudget, t.ri.id, len(t.pages)).Scan(&granted)
		if err == nil {
			t.pages = t.pages[:granted]
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("page budget: %w", err)
		}
	}
	return todo, nil
}

// pageJobs returns the page jobs of todo and how many there are per run.
func (c *Crawler) pageJobs(todo []runPages) ([]queue.EnqueueParams, map[int64]int) {
	added := map[int64]int{}
	var ps []queue.EnqueueParams
	for _, t := range todo {
		for _, p := range t.pages {
			args, _ := json.Marshal(p)
			ps = append(ps, queue.EnqueueParams{Queue: t.ri.queue, Kind: KindPage, Args: args, Priority: t.ri.priority,
				ParentID: t.ri.id, MaxAttempts: c.cfg.PageAttempts})
		}
		added[t.ri.id] = len(t.pages)
	}
	return ps, added
}

// addPages marks pages seen for run ri and enqueues the new ones, within tx (the start of a run).
func (c *Crawler) addPages(ctx context.Context, tx pgx.Tx, ri *runInfo, pages []pageArgs) (int, error) {
	adds := make([]pageAdd, len(pages))
	for i, p := range pages {
		adds[i] = pageAdd{ri: ri, page: p}
	}
	links := newLinkSet(adds)
	b := &pgx.Batch{}
	var fresh []seenKey
	links.queueSeen(b, &fresh)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, err
	}
	todo, err := c.grant(ctx, tx, links.newPages(fresh))
	if err != nil {
		return 0, err
	}
	ps, added := c.pageJobs(todo)
	if len(ps) > 0 {
		if _, err := c.cfg.Queue.EnqueueManyTx(ctx, tx, ps); err != nil {
			return 0, err
		}
	}
	return added[ri.id], nil
}
