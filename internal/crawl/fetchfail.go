package crawl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"crawlq/internal/backoff"
	"crawlq/internal/fetch"
	"crawlq/internal/queue"
)

// pageFetchFailed decides the fate of page p whose fetch failed with ferr (res: the answer that
// came with it, if any; start: when the request started): the worker's own decision when the
// worker is stopping or the fetch decided it, another proxy when the proxy failed (proxies.go),
// the end of a revisited page that is gone (revisit.go), else fetchFailed.
func (c *Crawler) pageFetchFailed(ctx context.Context, p *pageJob, ferr error, res *fetch.Result, start time.Time) error {
	if ctx.Err() != nil || queue.Decided(ferr) {
		return ferr // cancelled, lease lost or stopping: the worker decides; or get did
	}
	if perr, ok := c.proxyFailed(ctx, p.job, p.ri, p.v, ferr); ok {
		return perr
	}
	if p.rv.ended(ferr) {
		return c.revisitEnded(ctx, p.job, p.ri, p.host, p.rv, ferr, res, start)
	}
	return c.fetchFailed(ctx, p.job, p.ri, p.host, ferr, res, start)
}

// fetchFailed decides the fate of a page whose fetch (or its site's robots.txt fetch) failed.
// A failure that retrying will not fix is recorded and the page finishes. A failure of the host
// (the connection, or a streak of 5xx/429) pauses the host and puts the page back without counting
// the attempt, unless the host has been down for longer than the spider allows. Otherwise the
// attempt counts, and the page is retried with the spider's backoff (or the server's Retry-After)
// until it is dead.
//
// start is when the failed request started.
func (c *Crawler) fetchFailed(ctx context.Context, job *queue.Job, ri *runInfo, host string, ferr error, res *fetch.Result, start time.Time) error {
	kind := fetch.Kind(ferr)
	r := ri.settings.Retry
	if !fetch.Retryable(ferr) {
		// Recorded, not retried: 4xx other than 408/429, too large, bad URL; a refused address dies.
		if fetch.IsStatus(ferr) {
			c.hostAnswered(ctx, ri.id, host, start) // the host answers; the page is at fault
		}
		if errors.Is(ferr, fetch.ErrForbiddenAddress) {
			return c.pageRefused(ctx, job, ri, kind, ferr)
		}
		o := outcome{errors: 1, kind: kind}
		if res != nil {
			o.bytes = res.Bytes
		}
		return c.finishPage(ctx, job, ri, o, nil)
	}
	if hostDown, cause := c.hostFailure(ctx, host, ferr, r, job.ID); hostDown {
		limit := r.DownLimit(c.runFetched(ctx, ri))
		p, err := c.hostFailed(ctx, host, r, cause, limit)
		if err != nil {
			return err
		}
		if p.started {
			c.addStat(ctx, ri.id, outcome{hostPauses: 1})
			c.logHostPaused(ctx, ri.id, host, cause, p.until, limit)
		}
		if p.downFor < limit {
			wait := p.until.Sub(c.clk.Now())
			if d, ok := fetch.RetryAfter(ferr); ok {
				wait = max(wait, d)
			}
			return queue.Snooze(backoff.Spread(wait))
		}
		// Down for longer than the spider allows: the page dies now rather than at the end of
		// attempts that would each wait out a pause. Its attempt is counted by kind; the run
		// counts it among its errors while it is dead (see pageDied).
		c.addStat(ctx, ri.id, pageDied(kind))
		err = fmt.Errorf("host %s down for %s, past its down limit of %s: %w", host, p.downFor.Round(time.Millisecond), limit, ferr)
		c.log.Warn("page died: its host is down past its limit", "run", ri.id, "url", pageURL(job), "err", err)
		c.logPageDied(ctx, ri.id, pageURL(job), job.Attempt, err)
		return queue.Permanent(err)
	}
	if c.health.endedOutage(host, start) || c.health.othersFailing(host, job.ID) || c.health.firstSoft(job.ID) {
		// The last answer of an outage that ended while it was in flight, or perhaps one of the
		// first of one (other pages of the host fail too, or this is the page's first such
		// failure: hostHealth.firstSoft): put back, the attempt not counted, and counted as a
		// retry in the run's stats.
		c.addStat(ctx, ri.id, outcome{retries: 1, kind: kind})
		wait := r.PageBackoff(job.Attempt)
		if d, ok := fetch.RetryAfter(ferr); ok {
			wait = d
		}
		return queue.Snooze(wait)
	}
	o := outcome{retries: 1, kind: kind}
	if job.Attempt >= job.MaxAttempts {
		o = pageDied(kind)
		c.log.Warn("page died: its retries are exhausted", "run", ri.id, "url", pageURL(job), "attempts", job.Attempt, "err", ferr)
		c.logPageDied(ctx, ri.id, pageURL(job), job.Attempt, ferr)
	}
	c.addStat(ctx, ri.id, o)
	if d, ok := fetch.RetryAfter(ferr); ok && d > 0 {
		return queue.RetryIn(ferr, d)
	}
	return queue.RetryIn(ferr, r.PageBackoff(job.Attempt))
}

// pageRefused ends a page whose address the fetcher refused (not public, and neither the spider's
// allow_private nor the process's --allow-loopback lets it through): the page's failure, not its
// host's, so nothing waits. It dies at once, so its error, which names the address and what to
// set, is where the operator looks: the run's failed_pages and its log (crawlq logs), besides this
// process's log. Once it is allowed, crawlq redrive --run fetches it.
func (c *Crawler) pageRefused(ctx context.Context, job *queue.Job, ri *runInfo, kind string, ferr error) error {
	url := pageURL(job)
	c.log.Warn("page refused: its address is not public", "run", ri.id, "url", url, "err", ferr)
	c.addStat(ctx, ri.id, pageDied(kind))
	c.logPageDied(ctx, ri.id, url, job.Attempt, ferr)
	return queue.Permanent(ferr)
}

// pageDied is what the last attempt of a page that dies adds to its run's stats: its kind, and
// neither an error nor a retry. A dead page is counted among the run's errors from the queue,
// as long as it is dead (FinishRun, liveStats): a redrive that makes it live again takes it out
// (RetryRedriven), and one that dies by another path than this (a worker's crash, a failure
// to store it) is counted as well.
func pageDied(kind string) outcome { return outcome{kind: kind} }
