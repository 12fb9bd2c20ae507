package crawl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/backoff"
	"crawlq/internal/clock"
	"crawlq/internal/dbsqlc"
	"crawlq/internal/fetch"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
	"crawlq/internal/urlx"
)

// A host that is down pauses; its pages do not die. When a fetch fails at the connection level
// (refused, reset, a connect timeout) or a host fails several pages in a row (5xx, 429, read
// timeouts: one slow page is the page's failure, not the host's), the host is paused in its
// shared politeness row (crawlq_domain): every worker's pages of it then wait, without counting
// an attempt, until the pause ends, and the first page after it probes the host. Each failed
// probe doubles the pause (spider.Retry.HostPause up to MaxHostPause); while the host is in its
// streak, any such failure, a single 5xx included, is a failed probe and counts no attempt, and
// the first such failure of each page before the streak is known costs it none either
// (hostHealth.firstSoft). Once the host has been failing for longer than its down limit
// (Retry.DownLimit: HostDownLimit, or StartDownLimit while the run has fetched nothing), its pages
// die at their next failed probe, so a host that never comes back ends its runs incomplete
// (failed when nothing was fetched) with the dead pages listed, rather than pending forever. A
// page of the host that succeeds ends the streak. Maintenance keeps a paused host's row
// (PruneDomains), since the streak in it is what reaches the limit.
//
// Each process keeps what it learnt of a host's pause, so a page of a paused host is put back
// without a round trip; a process that has not seen the host fail learns of the pause from its own
// first failed fetch (each failure during a pause adds nothing to the streak).

// statusStreak is how many 5xx/429 answers or read timeouts in a row from one host (no answer of
// it in between), seen by one process from at least two of its pages, count as the host failing
// rather than the pages.
const statusStreak = 5

// hostHealth is this process's view of failing hosts.
type hostHealth struct {
	clk    clock.Clock // the crawler's: when a host failed and recovered, next to when a request started
	mu     sync.Mutex
	hosts  map[string]*hostState
	maxLen int
	// soft holds the page jobs put back once without counting an attempt after a 5xx, 429 or
	// timeout from a host not known to be failing (see firstSoft).
	soft map[int64]struct{}
}

// maxSoft bounds the page jobs remembered as put back once (firstSoft); past it they are forgotten,
// which costs a page at most one more uncounted try.
const maxSoft = 100000

type hostState struct {
	pausedUntil time.Time
	failing     bool // this process saw the host fail since its last success: a success ends the streak
	// statuses counts, per page job, the 5xx/429 answers and timeouts that came in a row (no
	// answer of the host in between). A streak needs statusStreak of them from at least two
	// pages: one broken page retried on a host with nothing else to fetch is that page's
	// failure, while an outage near a crawl's end, with a few pages left, is still the host's.
	statuses map[int64]int
	// lastFail is when this process last saw the host fail. A request that started before it
	// and then succeeded says nothing of the host now (it was answered before the outage), so
	// its success ends no streak.
	lastFail time.Time
	// recoveredAt is when this process last saw the host answer again after failing: a request
	// started before it that fails belongs to the outage that ended, not to its page.
	recoveredAt time.Time
}

func newHostHealth(clk clock.Clock) *hostHealth {
	return &hostHealth{clk: clk, hosts: map[string]*hostState{}, maxLen: 100000, soft: map[int64]struct{}{}}
}

// firstSoft reports whether this is the first 5xx, 429 or timeout of page job id seen here while
// its host was not known to be failing, and remembers it. Such an answer may be the first of a
// host's outage, which pauses the host only once a streak of them came in: the page is put back
// once without counting an attempt, so an outage's first answers cost their pages nothing, and
// a page that fails so again counts its attempts as before.
func (h *hostHealth) firstSoft(id int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.soft[id]; ok {
		return false
	}
	if len(h.soft) >= maxSoft {
		clear(h.soft)
	}
	h.soft[id] = struct{}{}
	return true
}

// paused returns how long pages of host must still wait, or 0.
func (h *hostHealth) paused(host string, now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.hosts[host]; s != nil && s.pausedUntil.After(now) {
		return s.pausedUntil.Sub(now)
	}
	return 0
}

func (h *hostHealth) state(host string) *hostState {
	s := h.hosts[host]
	if s == nil {
		if len(h.hosts) >= h.maxLen { // a bound, not an LRU: failing hosts are few
			clear(h.hosts)
		}
		s = &hostState{}
		h.hosts[host] = s
	}
	return s
}

// status notes an HTTP answer of host to a request of page job (0: not a page's) started at
// start and reports whether it completes a streak of failing pages.
func (h *hostHealth) status(host string, failing bool, start time.Time, job int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.hosts[host]
	if !failing {
		if s != nil && !start.Before(s.lastFail) {
			clear(s.statuses)
		}
		return false
	}
	s = h.state(host)
	s.lastFail = h.clk.Now()
	if s.statuses == nil {
		s.statuses = map[int64]int{}
	}
	s.statuses[job]++
	answers := 0
	for _, n := range s.statuses {
		answers += n
	}
	if answers >= statusStreak && len(s.statuses) >= 2 {
		clear(s.statuses)
		return true
	}
	return false
}

// pause records the shared pause of host that a failure here led to.
func (h *hostHealth) pause(host string, until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.state(host)
	s.pausedUntil, s.failing, s.lastFail = until, true, h.clk.Now()
}

// pausedTill sets host's pause to end at until, as its shared row says.
func (h *hostHealth) pausedTill(host string, until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.state(host).pausedUntil = until
}

// forget drops what this process learnt of host's failing: its pause was ended in the shared row.
func (h *hostHealth) forget(host string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.hosts, host)
}

// isFailing reports whether this process has seen host fail since it last answered.
func (h *hostHealth) isFailing(host string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.hosts[host]
	return s != nil && s.failing
}

// recovered reports whether host, seen failing here, answered a request started at start, after
// its last failure, and then forgets the failure.
func (h *hostHealth) recovered(host string, start time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.hosts[host]
	if s == nil || !s.failing || start.Before(s.lastFail) {
		return false
	}
	*s = hostState{recoveredAt: h.clk.Now()}
	return true
}

// othersFailing reports whether other pages of host than job failed in the streak this page's
// failure is part of (no answer of the host since): then the host may be going down, and the
// page's failure does not count until the streak is judged.
func (h *hostHealth) othersFailing(host string, job int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.hosts[host]
	if s == nil {
		return false
	}
	for j := range s.statuses {
		if j != job {
			return true
		}
	}
	return false
}

// endedOutage reports whether host answered again, after failing, since a request that started at
// start: that request's failure is the last of an outage that is over.
func (h *hostHealth) endedOutage(host string, start time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.hosts[host]
	return s != nil && !s.failing && s.recoveredAt.After(start)
}

// hostPause is the shared state of a failing host after a failure was recorded.
type hostPause struct {
	until   time.Time
	streak  int
	downFor time.Duration
	started bool // this failure started a new pause (not one during a pause already running)
}

// hostFailed records a failure of host (cause says which, for the log) in its shared row and
// returns the pause; limit is how long the host may be down before its pages die.
func (c *Crawler) hostFailed(ctx context.Context, host string, r spider.Retry, cause string, limit time.Duration) (hostPause, error) {
	stale := staleAfter(r)
	row, err := c.db.HostFailed(ctx, dbsqlc.HostFailedParams{
		Host: host, FirstPauseUs: r.HostPause.Microseconds(), MaxPauseUs: r.MaxHostPause.Microseconds(),
		StaleAfterUs: stale.Microseconds(), Now: c.now(),
	})
	if err != nil {
		return hostPause{}, fmt.Errorf("pause host %s: %w", host, err)
	}
	p := hostPause{until: row.PausedUntil, streak: int(row.FailStreak), started: row.Started,
		downFor: time.Duration(row.DownSeconds * float64(time.Second))}
	c.health.pause(host, p.until)
	if p.started {
		c.log.Warn("host paused: "+cause+"; its pages wait without counting attempts",
			"host", host, "streak", p.streak, "until", p.until, "down_for", p.downFor.Round(time.Millisecond).String(),
			"pages_die_after", limit.String())
	}
	return p, nil
}

// failing reports whether host is known to be in a failing streak: seen so here, else in its
// shared row (another process paused it). A lookup error counts as not failing: the page's
// failure then counts as its own, as it did before the host was known down.
func (c *Crawler) failing(ctx context.Context, host string, r spider.Retry) bool {
	if c.health.isFailing(host) {
		return true
	}
	f, err := c.db.HostFailing(ctx, dbsqlc.HostFailingParams{Host: host, StaleAfterUs: staleAfter(r).Microseconds(), Now: c.now()})
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		c.log.Warn("could not read whether a host is failing; counting its answer as the page's failure", "host", host, "err", err)
	}
	return f
}

// staleAfter is how long after its last pause ended a host's streak is forgotten.
func staleAfter(r spider.Retry) time.Duration { return max(2*r.MaxHostPause, time.Minute) }

// hostFailure says whether a retryable fetch failure is the host's rather than the page's, and
// why, for the log: a connection failure; any 5xx, 429 or timeout while the host is known
// failing (a failed probe); or a streak of them seen here.
func (c *Crawler) hostFailure(ctx context.Context, host string, ferr error, r spider.Retry, job int64) (bool, string) {
	if fetch.IsHostFailure(ferr) {
		return true, "its connections fail (" + fetch.Kind(ferr) + ")"
	}
	streak := c.health.status(host, true, time.Time{}, job)
	if c.failing(ctx, host, r) {
		return true, "it still fails (" + ferr.Error() + ")"
	}
	if streak {
		return true, fmt.Sprintf("%d answers in a row were HTTP 5xx, 429 or timeouts (the last: %s)", statusStreak, ferr)
	}
	return false, ""
}

// runFetched reports whether any page of run ri has been fetched, by this process or, once asked,
// another. Until one has, the run's hosts have the shorter start down limit. A lookup error
// counts as fetched: the longer limit never kills a page early.
func (c *Crawler) runFetched(ctx context.Context, ri *runInfo) bool {
	if ri.fetched.Load() {
		return true
	}
	f, err := c.db.RunFetchedAny(ctx, ri.id)
	if err != nil {
		c.log.Warn("could not read whether the run fetched a page; giving its hosts the longer down limit", "run", ri.id, "err", err)
		return true
	}
	if f {
		ri.fetched.Store(true)
	}
	return f
}

// hostAnswered ends host's failing streak after it answered a fetch started at start (for a page
// of run runID, whose log says so), when this process saw it fail before.
func (c *Crawler) hostAnswered(ctx context.Context, runID int64, host string, start time.Time) {
	c.health.status(host, false, start, 0)
	if !c.health.recovered(host, start) {
		return
	}
	if err := c.db.HostRecovered(context.WithoutCancel(ctx), host); err != nil {
		c.log.Warn("host answers again, but its pause could not be cleared; the next failure starts a new streak once it is stale", "host", host, "err", err)
		return
	}
	c.log.Info("host answers again", "host", host)
	c.logHostResumed(ctx, runID, host)
}

// HostDown is a host's pause while it lasts, as crawlq run --watch shows it.
type HostDown struct {
	Host        string
	PausedUntil time.Time // its pages wait until then; the first one after probes it
	Probes      int       // failures in its streak
	Since       time.Time // when it began failing
	// DownLimit is how long the run lets the host stay down (Retry.DownLimit: the shorter start
	// limit while the run has fetched nothing), and GivesUpAt is Since plus it: the first failed
	// probe after then ends the host's pages of the run as dead.
	DownLimit time.Duration
	GivesUpAt time.Time
}

// HostPause returns the pause of the host of pageURL, a page of run runID, and false when the
// host is not paused.
func (c *Crawler) HostPause(ctx context.Context, runID int64, pageURL string) (HostDown, bool, error) {
	host := urlx.Host(pageURL)
	row, err := c.db.HostPauseOf(ctx, dbsqlc.HostPauseOfParams{Host: host, Now: c.now()})
	if errors.Is(err, pgx.ErrNoRows) {
		return HostDown{}, false, nil
	}
	if err != nil {
		return HostDown{}, false, fmt.Errorf("host pause of %s: %w", host, err)
	}
	ri, err := c.runInfo(ctx, runID)
	if err != nil {
		return HostDown{}, false, err
	}
	limit := ri.settings.Retry.DownLimit(c.runFetched(ctx, ri))
	return HostDown{Host: host, PausedUntil: row.PausedUntil, Probes: int(row.FailStreak), Since: row.DownSince,
		DownLimit: limit, GivesUpAt: row.DownSince.Add(limit)}, true, nil
}

// hostPaused puts back a page whose host is paused, to wait for the pause to end without counting
// an attempt; nil when the host is not paused.
func (c *Crawler) hostPaused(host string) error {
	if d := c.health.paused(host, c.clk.Now()); d > 0 {
		return queue.Snooze(backoff.Spread(d))
	}
	return nil
}

// pagePaused is hostPaused for page job, except that a redriven page (queue.Job.Redriven) trusts
// the host's shared row over what this process learnt: the redrive cleared the pause there
// (Redrive), and another process may have done it, so the page is fetched at once rather than
// wait out a pause the operator ended. A pause in the row (the host failed again since) still
// holds; a failed lookup keeps this process's view.
func (c *Crawler) pagePaused(ctx context.Context, host string, job *queue.Job) error {
	now := c.clk.Now()
	if c.health.paused(host, now) <= 0 || !job.Redriven() {
		return c.hostPaused(host)
	}
	row, err := c.db.HostPauseOf(ctx, dbsqlc.HostPauseOfParams{Host: host, Now: c.now()})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		c.health.forget(host)
		return nil
	case err != nil:
		c.log.Warn("could not read a host's pause for a redriven page; it waits out the pause this process knows", "host", host, "err", err)
		return c.hostPaused(host)
	}
	c.health.pausedTill(host, row.PausedUntil)
	return queue.Snooze(backoff.Spread(row.PausedUntil.Sub(now)))
}

// clearPauses ends the pauses of hosts in the shared rows (through db, the redrive's
// transaction) and returns those that were paused.
func clearPauses(ctx context.Context, db *dbsqlc.Queries, hosts []string) ([]dbsqlc.ClearHostPausesRow, error) {
	if len(hosts) == 0 {
		return nil, nil
	}
	rows, err := db.ClearHostPauses(ctx, hosts)
	if err != nil {
		return nil, fmt.Errorf("clear host pauses: %w", err)
	}
	return rows, nil
}
