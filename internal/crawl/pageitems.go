package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"crawlq/internal/items"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
)

// A parsed page's items go to the run's sink in one of two ways: with Config.TxSink, inside the
// transaction that finishes the page (finish.go), so they commit exactly when the page does;
// otherwise through Config.Pipeline before the page finishes.

// pageItems turns the items a spider yielded on the page at url into run ri's items, each
// validated; an item that cannot be stored fails its page for good.
func pageItems(ri *runInfo, url string, yielded []spider.Item) ([]items.Item, error) {
	if len(yielded) == 0 {
		return nil, nil
	}
	its := make([]items.Item, len(yielded))
	for i, it := range yielded {
		data, err := json.Marshal(it.Fields)
		if err != nil {
			return nil, queue.Permanent(fmt.Errorf("item %q: %w", it.Key, err))
		}
		its[i] = items.Item{RunID: ri.id, Spider: ri.name, Key: it.Key, URL: url, Data: data}
		if err := its[i].Validate(); err != nil {
			return nil, queue.Permanent(err)
		}
	}
	return its, nil
}

// storePage stores a parsed page's items in the run's sink and finishes the page with its
// outcome o and its follow-ups.
func (c *Crawler) storePage(ctx context.Context, p *pageJob, o outcome, follow []pageArgs, its []items.Item) error {
	if c.cfg.TxSink != nil {
		return c.finishPageItems(ctx, p.job, p.ri, o, follow, its)
	}
	if err := c.writeItems(ctx, its); err != nil {
		return err
	}
	return c.finishPage(ctx, p.job, p.ri, o, follow)
}

// writeItems writes a page's items through the pipeline, within Config.ItemTimeout. A sink that is
// behind puts the page back (a snooze) rather than hold a worker.
func (c *Crawler) writeItems(ctx context.Context, its []items.Item) error {
	if len(its) == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, c.cfg.ItemTimeout)
	err := c.cfg.Pipeline.Write(wctx, its)
	cancel()
	if err != nil {
		if errors.Is(err, items.ErrBackpressure) || (ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded)) {
			return queue.Snooze(jitter(time.Second))
		}
		return err
	}
	return nil
}
