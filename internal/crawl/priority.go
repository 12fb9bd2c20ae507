package crawl

import (
	"context"
	"math"
	"slices"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
	"crawlq/internal/urlstate"
)

// Page priority from the expected change: the page jobs of a run whose spider revisits adaptive
// are ordered by how likely each page changed since its last fetch (urlstate.ExpectedChange), so a
// run cut short (cancelled, out of its page budget, its host down) has spent its requests where
// changes were likely. A page's job priority is its run's, less up to changeBand by its expected
// change: a page sure to have changed (or new) runs at the run's priority, one just due 5 below,
// one not due (which costs no request) lower still. A page never runs above its run's priority,
// so a run at a higher priority still goes first, whole; only a run less than changeBand below
// it can come before some of its pages. Within one batch of links the pages are also put in that
// order, so those handed to this process's own idle workers (queue.Reservation) and those a
// short page budget admits are the likeliest to have changed. The cost is one statement a batch
// of links (GetURLDue: a primary key lookup each), for adaptive runs alone: a run that revisits
// always or changed_only keeps its run's priority for every page, and reads nothing.

// changeBand is how far below its run's priority a page job of an adaptive run may be.
const changeBand = 10

// changePriority is the job priority of a page of a run at priority run whose expected change is p.
func changePriority(run int, p float64) int {
	return max(run-int(math.Round((1-p)*changeBand)), queue.MinPriority)
}

// rankPages orders pages of run ri by expected change, likeliest first, and returns the job
// priority of each (in the new order); nil (and pages as they were) when the run's spider does
// not revisit adaptive: every page then has the run's priority.
func (c *Crawler) rankPages(ctx context.Context, q *dbsqlc.Queries, ri *runInfo, pages []pageArgs) ([]int, error) {
	if ri.settings.Revisit != spider.RevisitAdaptive || ri.spider == nil || len(pages) == 0 {
		return nil, nil
	}
	urls := make([]string, 0, len(pages))
	for _, p := range pages {
		if p.Sitemap == "" {
			urls = append(urls, p.URL)
		}
	}
	due, err := urlstate.LoadDue(ctx, q, ri.name, spider.StateLine(ri.spider), urls)
	if err != nil {
		return nil, err
	}
	now := c.clk.Now()
	type ranked struct {
		page pageArgs
		prio int
	}
	rs := make([]ranked, len(pages))
	for i, p := range pages {
		rs[i].page, rs[i].prio = p, ri.priority // a sitemap is read every run: it has no state
		if p.Sitemap == "" {
			d, known := due[p.URL]
			rs[i].prio = changePriority(ri.priority, urlstate.ExpectedChange(d, known, now))
		}
	}
	slices.SortStableFunc(rs, func(a, b ranked) int { return b.prio - a.prio })
	prios := make([]int, len(rs))
	for i, r := range rs {
		pages[i], prios[i] = r.page, r.prio
	}
	return prios, nil
}
