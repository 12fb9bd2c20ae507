package crawl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/fetch"
	"crawlq/internal/queue"
	"crawlq/internal/robots"
	"crawlq/internal/urlx"
)

// A spider that obeys robots.txt (Settings.ObeyRobots) reads each site's robots.txt once per run:
// one worker claims and fetches it, stores it in Postgres (crawlq_robots) for every worker, and
// each process caches it. A page its site disallows finishes without being fetched.

// obeyRobots lets page p go on when robots.txt allows it (or its spider does not obey robots.txt);
// else it decides the page's fate: finished as disallowed, put back while another worker fetches
// the file or its host is busy, or failed as the page's own fetch would have (fetchFailed).
func (c *Crawler) obeyRobots(ctx context.Context, p *pageJob) error {
	if !p.s.ObeyRobots {
		return nil
	}
	pol, wait, err := c.policy(ctx, p.ri, p.fetcher, p.v, p.a.URL)
	var rf *robotsFetchError
	if errors.As(err, &rf) {
		if perr, ok := c.proxyFailed(ctx, p.job, p.ri, p.v, rf.err); ok {
			return perr
		}
		return c.fetchFailed(ctx, p.job, p.ri, p.host, rf.err, nil, rf.start)
	}
	if err != nil {
		return err
	}
	if wait > 0 {
		return queue.Snooze(wait)
	}
	if u, perr := url.Parse(p.a.URL); perr == nil && !pol.Allowed(p.s.UserAgent, u.RequestURI()) {
		return c.finishPage(ctx, p.job, p.ri, outcome{kind: "robots_disallowed"}, nil)
	}
	return nil
}

// policy returns the robots.txt policy for pageURL's site in this run: from this process's cache,
// else from Postgres, else by fetching it — once per site per run, by whichever worker claims it
// (the others wait: a positive duration). f goes through v, the page's proxy (nil: direct).
func (c *Crawler) policy(ctx context.Context, ri *runInfo, f *fetch.Fetcher, v *via, pageURL string) (*robots.Policy, time.Duration, error) {
	origin, err := robots.RobotsURL(pageURL)
	if err != nil {
		return nil, 0, nil // the fetch will report the bad URL
	}
	return c.policyAt(ctx, ri, f, v, origin, pageURL)
}

// policyAt is policy for a page whose robots.txt URL (origin) the caller has worked out.
func (c *Crawler) policyAt(ctx context.Context, ri *runInfo, f *fetch.Fetcher, v *via, origin, pageURL string) (*robots.Policy, time.Duration, error) {
	p, wait, claimed, err := c.knownPolicy(ctx, ri, origin)
	if !claimed {
		return p, wait, err
	}
	return c.fetchRobots(ctx, ri, f, v, origin, urlx.Host(pageURL))
}

// knownPolicy returns origin's policy as this process or Postgres knows it, or how long to wait
// while another worker fetches it; claimed: neither knows it, and this worker now holds the claim
// to fetch it (fetchRobots).
func (c *Crawler) knownPolicy(ctx context.Context, ri *runInfo, origin string) (p *robots.Policy, wait time.Duration, claimed bool, err error) {
	if p, ok := c.robots.Get(ri.id, origin); ok {
		return p, 0, false, nil
	}
	stored, err := c.db.GetRobots(ctx, dbsqlc.GetRobotsParams{RunID: ri.id, Origin: origin, Now: c.now()})
	switch {
	case err == nil && stored.Status.Valid:
		p := robots.FromStored(int(stored.Status.Int32), stored.Body)
		c.robots.Put(ri.id, origin, p)
		return p, 0, false, nil
	case err == nil && stored.Fresh:
		return nil, jitter(300 * time.Millisecond), false, nil // another worker is fetching it
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return nil, 0, false, fmt.Errorf("read robots.txt: %w", err)
	}
	if _, err := c.db.ClaimRobots(ctx, dbsqlc.ClaimRobotsParams{RunID: ri.id, Origin: origin, Now: c.now()}); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, jitter(300 * time.Millisecond), false, nil
		}
		return nil, 0, false, fmt.Errorf("claim robots.txt: %w", err)
	}
	return nil, 0, true, nil
}

// fetchRobots fetches origin's robots.txt under this worker's claim, politely (its host's delay,
// and its proxy's slot and delay as any request through v takes), and stores it for every
// worker; on any failure it gives the claim up.
func (c *Crawler) fetchRobots(ctx context.Context, ri *runInfo, f *fetch.Fetcher, v *via, origin, host string) (*robots.Policy, time.Duration, error) {
	unclaim := func() {
		// A claim left behind goes stale in 60 seconds, when another worker takes it over.
		if err := c.db.UnclaimRobots(context.WithoutCancel(ctx), dbsqlc.UnclaimRobotsParams{RunID: ri.id, Origin: origin}); err != nil {
			c.log.Warn("give up robots.txt claim; it goes stale in 60s", "origin", origin, "err", err)
		}
	}
	if ri.settings.Delay > 0 {
		release, wait, err := c.reserve(ctx, host, ri.settings.Delay)
		if err != nil || wait > 0 {
			unclaim()
			return nil, wait, err
		}
		defer release()
	}
	releaseProxy, err := c.takeProxy(ctx, v, ri.settings)
	if err != nil { // its proxy is busy: a snooze
		unclaim()
		return nil, 0, err
	}
	defer releaseProxy()
	start := c.clk.Now()
	res, ferr := f.Fetch(ctx, origin)
	st := 0
	var got []byte
	switch {
	case res != nil:
		st, got = res.Status, res.Body
	case ctx.Err() != nil:
		unclaim()
		return nil, 0, fmt.Errorf("fetch %s: %w", origin, ferr)
	case fetch.Retryable(ferr), errors.Is(ferr, fetch.ErrForbiddenAddress):
		// A refused address is the page's failure, said as such (fetchFailed), not a robots.txt
		// that disallows everything; nothing is stored, so each page of the origin is refused.
		unclaim()
		return nil, 0, &robotsFetchError{fmt.Errorf("fetch %s: %w", origin, ferr), start}
	}
	// Status 0 (unreachable for good) disallows everything, as RFC 9309 asks.
	if len(got) > robots.MaxBodyBytes {
		got = got[:robots.MaxBodyBytes]
	}
	if err := c.db.StoreRobots(ctx, dbsqlc.StoreRobotsParams{RunID: ri.id, Origin: origin, Status: int32(st), Body: got}); err != nil {
		unclaim()
		return nil, 0, fmt.Errorf("store robots.txt: %w", err)
	}
	p := robots.FromStored(st, got)
	c.robots.Put(ri.id, origin, p)
	return p, 0, nil
}

// robotsFetchError is a failed fetch of a site's robots.txt that may pass: the page that needed it
// meets the same fate as if its own fetch had failed so (fetchFailed).
type robotsFetchError struct {
	err   error
	start time.Time // when the robots.txt request started
}

func (e *robotsFetchError) Error() string { return e.err.Error() }
func (e *robotsFetchError) Unwrap() error { return e.err }
