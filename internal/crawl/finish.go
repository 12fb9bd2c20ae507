package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"crawlq/internal/items"
	"crawlq/internal/queue"
)

// Finishing pages is group-committed: the pages of this process that are ready to finish wait for
// one transaction that marks all their links seen, enqueues the new ones, records their stats and
// completes them (fenced by their leases). Each page's links still commit together with its
// completion, which is what completion detection relies on; a page whose lease turns out lost
// makes the batch roll back and go again without it. One transaction per batch instead of per page
// is what lets a crawl go at thousands of pages a second.

const (
	finishers    = 4   // batches in flight at once
	maxFinishing = 256 // pages per batch
)

// finishReq is one page waiting to be finished.
type finishReq struct {
	job      *queue.Job
	ri       *runInfo
	o        outcome
	follow   []pageArgs
	markOnly []string
	items    []items.Item // written in the batch's transaction (Config.TxSink)
	done     chan error
}

// finishPage finishes a page in the next batch and returns queue.ErrCompleted once it committed.
func (c *Crawler) finishPage(ctx context.Context, job *queue.Job, ri *runInfo, o outcome, follow []pageArgs, markOnly []string) error {
	return c.finish(ctx, &finishReq{job: job, ri: ri, o: o, follow: follow, markOnly: markOnly})
}

// finishPageItems is finishPage with the page's items, written in the same transaction.
func (c *Crawler) finishPageItems(ctx context.Context, job *queue.Job, ri *runInfo, o outcome, follow []pageArgs, its []items.Item) error {
	return c.finish(ctx, &finishReq{job: job, ri: ri, o: o, follow: follow, items: its})
}

func (c *Crawler) finish(ctx context.Context, r *finishReq) error {
	c.finishOnce.Do(func() {
		c.finishQ = make(chan *finishReq, maxFinishing*finishers)
		for range finishers {
			c.finishers.Add(1)
			go c.finishLoop()
		}
	})
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
		added, lost, err := c.commitBatch(ctx, batch)
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
			for _, r := range batch {
				r.done <- nil
			}
			c.afterBatch(batch, added)
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

// afterBatch follows a committed batch: once per run in it (see enqueued).
func (c *Crawler) afterBatch(batch []*finishReq, added map[int64]int) {
	done := map[int64]bool{}
	for _, r := range batch {
		if !done[r.ri.id] {
			done[r.ri.id] = true
			c.enqueued(r.ri, added[r.ri.id])
		}
	}
}

// pageAdd is a page to enqueue (or only mark seen) for a run.
type pageAdd struct {
	ri       *runInfo
	page     pageArgs
	markOnly bool
}

// commitBatch runs one batch's transaction. It returns the pages added per run, or the ids of
// pages whose lease was lost (then nothing was committed).
func (c *Crawler) commitBatch(ctx context.Context, batch []*finishReq) (map[int64]int, map[int64]bool, error) {
	var added map[int64]int
	var lost map[int64]bool
	err := c.inTx(ctx, func(tx pgx.Tx) error {
		var withLinks []int64
		for _, r := range batch {
			if len(r.follow) > 0 {
				withLinks = append(withLinks, r.ri.id)
			}
		}
		cancelled := map[int64]bool{}
		if len(withLinks) > 0 {
			rows, err := tx.Query(ctx, sqlCancelledRuns, withLinks)
			if err != nil {
				return fmt.Errorf("read runs: %w", err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return fmt.Errorf("read runs: %w", err)
			}
			for _, id := range ids {
				cancelled[id] = true // being cancelled: add nothing more (the sweep catches a race)
			}
		}
		var adds []pageAdd
		for _, r := range batch {
			if !cancelled[r.ri.id] {
				for _, p := range r.follow {
					adds = append(adds, pageAdd{ri: r.ri, page: p})
				}
			}
			for _, u := range r.markOnly {
				adds = append(adds, pageAdd{ri: r.ri, page: pageArgs{URL: u}, markOnly: true})
			}
		}
		var err error
		if added, err = c.addPagesTx(ctx, tx, adds); err != nil {
			return err
		}
		n := len(batch)
		runs, pages, nItems, errs, retries := make([]int64, n), make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
		bytes, kinds := make([]int64, n), make([]string, n)
		leases := make([]queue.Lease, n)
		for i, r := range batch {
			runs[i], pages[i], nItems[i], errs[i], retries[i] = r.ri.id, int32(r.o.pages), int32(r.o.items), int32(r.o.errors), int32(r.o.retries)
			bytes[i], kinds[i] = r.o.bytes, r.o.kind
			leases[i] = r.job.Lease()
		}
		if _, err := tx.Exec(ctx, sqlAddStats, runs, pages, nItems, bytes, errs, retries, kinds); err != nil {
			return fmt.Errorf("record stats: %w", err)
		}
		var its []items.Item
		for _, r := range batch {
			its = append(its, r.items...)
		}
		if len(its) > 0 {
			if err := c.cfg.TxSink.WriteTx(ctx, tx, its); err != nil {
				return err
			}
		}
		l, err := c.cfg.Queue.CompleteManyTx(ctx, tx, leases)
		if err != nil {
			return err
		}
		if len(l) > 0 {
			lost = map[int64]bool{}
			for _, id := range l {
				lost[id] = true
			}
			return errLostInBatch
		}
		return nil
	})
	if errors.Is(err, errLostInBatch) {
		return nil, lost, nil
	}
	return added, nil, err
}

// errLostInBatch rolls a batch back when one of its pages lost its lease.
var errLostInBatch = errors.New("a page of the batch lost its lease")

// addPagesTx marks pages seen for their runs and enqueues the new ones as page jobs, within each
// run's page budget, in one statement per step whatever the number of runs. It returns how many
// it enqueued per run.
func (c *Crawler) addPagesTx(ctx context.Context, tx pgx.Tx, adds []pageAdd) (map[int64]int, error) {
	added := map[int64]int{}
	if len(adds) == 0 {
		return added, nil
	}
	type key struct {
		run int64
		h   [16]byte
	}
	byKey := make(map[key]pageAdd, len(adds))
	runIDs := make([]int64, 0, len(adds))
	hashes := make([]pgtype.UUID, 0, len(adds))
	for _, a := range adds {
		k := key{a.ri.id, urlHash(a.page.URL)}
		if prev, dup := byKey[k]; dup && !prev.markOnly {
			continue
		}
		if _, dup := byKey[k]; !dup {
			runIDs = append(runIDs, k.run)
			hashes = append(hashes, pgtype.UUID{Bytes: k.h, Valid: true})
		}
		byKey[k] = a
	}
	rows, err := tx.Query(ctx, sqlSeenMany, runIDs, hashes)
	if err != nil {
		return nil, fmt.Errorf("mark seen: %w", err)
	}
	type fresh struct {
		Run int64
		H   pgtype.UUID
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[fresh])
	if err != nil {
		return nil, fmt.Errorf("mark seen: %w", err)
	}
	todo := map[int64][]pageAdd{}
	var order []int64
	for _, f := range got {
		a, ok := byKey[key{f.Run, f.H.Bytes}]
		if !ok || a.markOnly {
			continue
		}
		if todo[f.Run] == nil {
			order = append(order, f.Run)
		}
		todo[f.Run] = append(todo[f.Run], a)
	}
	var ps []queue.EnqueueParams
	for _, run := range order {
		list := todo[run]
		ri := list[0].ri
		if ri.settings.MaxPages > 0 {
			var granted int64
			err := tx.QueryRow(ctx, sqlTakeBudget, run, len(list)).Scan(&granted)
			if err == nil {
				list = list[:granted]
			} else if !errors.Is(err, pgx.ErrNoRows) {
				return nil, fmt.Errorf("page budget: %w", err)
			}
		}
		for _, a := range list {
			args, _ := json.Marshal(a.page)
			ps = append(ps, queue.EnqueueParams{Queue: ri.queue, Kind: KindPage, Args: args, Priority: ri.priority,
				ParentID: ri.id, MaxAttempts: c.cfg.PageAttempts})
		}
		added[run] = len(list)
	}
	if len(ps) > 0 {
		if _, err := c.cfg.Queue.EnqueueManyTx(ctx, tx, ps); err != nil {
			return nil, err
		}
	}
	return added, nil
}
