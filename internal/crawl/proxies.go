package crawl

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"crawlq/internal/backoff"
	"crawlq/internal/clock"
	"crawlq/internal/dbsqlc"
	"crawlq/internal/fetch"
	"crawlq/internal/proxy"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
)

// The pages of a spider with proxies (Settings.Proxies) go through them in turn, their
// robots.txt too: one proxy.Rotation per spider's list in this process. A proxy that fails
// (proxy.ErrProxy: unreachable, credentials refused, no tunnel) or whose page is banned
// (Settings.Ban) is benched with a doubling rest, shared by every worker process through its row
// in crawlq_domain (keyed "proxy " and its redacted URL; the host pause's queries: HostFailed
// doubles it, HostRecovered ends its streak once a request through it is answered again). Each
// process reads the benched proxies of a list at most every proxySync before choosing one, so a
// proxy benched by one worker is skipped by the others without failing them first. The rest is
// said in the process log and the run's log (once per rest, by the process that started it, the
// password redacted) and counted in the run's stats (kinds "proxy" and "banned"). The page is
// put back at once to go through another proxy, without counting an attempt, up to
// maxProxyTries proxy failures or Ban.Retries bans of the page in this process; past them they
// count as any retryable failure. While every proxy rests, pages wait for the first one back. A
// database that cannot be reached leaves each process with its own rests (said in its log).

// maxProxyTries bounds the uncounted retries of one page whose proxy failed.
const maxProxyTries = 10

// proxySync is how often a process reads which of a list's proxies other processes benched.
const proxySync = time.Second

// proxies is a spider's list of proxies in this process: its rotation, and when the benches
// shared in crawlq_domain were last read into it.
type proxies struct {
	rot  *proxy.Rotation
	keys []string // each proxy's row in crawlq_domain

	mu     sync.Mutex
	synced clock.Stopwatch // since the last read of the benches; zero: never read
}

// proxyKey is p's row in crawlq_domain.
func proxyKey(p *proxy.Proxy) string { return "proxy " + p.String() }

// via is the proxy a page goes through, from its spider's rotation; nil: direct.
type via struct {
	ps *proxies
	px *proxy.Proxy
}

func (v *via) proxy() *proxy.Proxy {
	if v == nil {
		return nil
	}
	return v.px
}

// rotation returns this process's rotation of a spider's proxies, their ${CRAWLQ_PROXY_...}
// variables filled from Config.ProxyEnv.
func (c *Crawler) rotation(s spider.Settings) (*proxies, error) {
	key := strings.Join(s.Proxies, "\n")
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.rotations[key]; r != nil {
		return r, nil
	}
	lookup := proxy.Lookup(c.cfg.ProxyEnv)
	ps := make([]*proxy.Proxy, len(s.Proxies))
	keys := make([]string, len(s.Proxies))
	for i, raw := range s.Proxies {
		var err error
		if ps[i], err = proxy.ParseExpanded(raw, lookup); err != nil {
			return nil, fmt.Errorf("proxies[%d]: %w", i, err)
		}
		keys[i] = proxyKey(ps[i])
	}
	r := &proxies{rot: proxy.NewRotation(ps, c.proxyRest(), proxy.DefaultRestMax), keys: keys}
	c.rotations[key] = r
	return r, nil
}

func (c *Crawler) proxyRest() time.Duration {
	if c.cfg.ProxyRest > 0 {
		return c.cfg.ProxyRest
	}
	return proxy.DefaultRestBase
}

// sync reads which of ps's proxies are benched, by any process, unless it did so within
// proxySync. A failed read is logged; the process goes on with what it knew.
func (c *Crawler) sync(ctx context.Context, ps *proxies) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.synced.Elapsed() < proxySync {
		return
	}
	rows, err := c.db.PausedOf(ctx, dbsqlc.PausedOfParams{Hosts: ps.keys, Now: c.now()})
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("could not read which proxies other workers benched; going on with this process's view", "err", err)
		}
		return
	}
	ps.synced = clock.StartStopwatch()
	byKey := make(map[string]time.Time, len(rows))
	for _, r := range rows {
		byKey[r.Host] = r.PausedUntil
	}
	for i, px := range ps.rot.Proxies() {
		if until, ok := byKey[ps.keys[i]]; ok {
			ps.rot.RestUntil(px, until, false)
		}
	}
}

// pickProxy chooses the proxy of a page: nil for a spider without proxies; an error to return
// (a snooze while every proxy rests, or a spider whose proxies cannot be read).
func (c *Crawler) pickProxy(ctx context.Context, s spider.Settings) (*via, error) {
	if len(s.Proxies) == 0 {
		return nil, nil
	}
	ps, err := c.rotation(s)
	if err != nil {
		return nil, queue.Permanent(err)
	}
	c.sync(ctx, ps)
	px, wait := ps.rot.Next(c.clk.Now())
	if px == nil {
		return nil, queue.Snooze(backoff.Spread(wait))
	}
	return &via{ps: ps, px: px}, nil
}

// rest benches a page's proxy for cause, in its shared row (in this process only when that
// cannot be written), said once per rest in the logs.
func (c *Crawler) rest(ctx context.Context, runID int64, v *via, cause string) {
	rest := c.proxyRest()
	row, err := c.db.HostFailed(context.WithoutCancel(ctx), dbsqlc.HostFailedParams{
		Host: proxyKey(v.px), FirstPauseUs: rest.Microseconds(), MaxPauseUs: proxy.DefaultRestMax.Microseconds(),
		StaleAfterUs: (2 * proxy.DefaultRestMax).Microseconds(), Now: c.now(),
	})
	var d time.Duration
	fresh := false
	if err != nil {
		c.log.Warn("could not bench a proxy for every worker; benched in this process only", "proxy", v.px.String(), "err", err)
		d, fresh = v.ps.rot.Rest(v.px, c.clk.Now())
	} else {
		v.ps.rot.RestUntil(v.px, row.PausedUntil, true)
		fresh = row.Started
		// The rest HostFailed started: the first one doubled per failed probe before, at most
		// the longest (its LEAST).
		d = backoff.Policy{Base: min(rest, proxy.DefaultRestMax), Max: proxy.DefaultRestMax}.Delay(int(row.FailStreak))
	}
	if fresh {
		c.log.Warn("proxy rested", "run", runID, "proxy", v.px.String(), "for", d, "cause", cause)
		c.pageLog().ProxyRested(ctx, runID, c.clk.Now(), v.px.String(), cause, d)
	}
}

// takeProxy holds a page's proxy for one request, as takeHost holds its host: one of its
// Settings.ProxyConcurrency slots in this process and, with a Settings.ProxyDelay, its
// politeness slot across every worker (its row in crawlq_domain). Nothing to take for a page
// without a proxy, or a spider that sets neither.
func (c *Crawler) takeProxy(ctx context.Context, v *via, s spider.Settings) (release func(), err error) {
	if v == nil || (s.ProxyConcurrency <= 0 && s.ProxyDelay <= 0) {
		return func() {}, nil
	}
	return c.take(ctx, proxyKey(v.px), s.ProxyConcurrency, s.ProxyDelay)
}

// proxyAnswered records that a request through a page's proxy got an answer: when it had
// failed here, its shared streak ends, so its next failure rests it for the first rest again.
func (c *Crawler) proxyAnswered(ctx context.Context, v *via) {
	if v == nil || !v.ps.rot.OK(v.px) {
		return
	}
	if err := c.db.HostRecovered(context.WithoutCancel(ctx), proxyKey(v.px)); err != nil {
		c.log.Warn("a proxy answers again, but its streak could not be cleared; it goes stale in 20 minutes", "proxy", v.px.String(), "err", err)
	}
}

// proxyFailed handles a fetch whose proxy failed: the proxy rests and the page goes back for
// another, uncounted, while it has tries left (ok true); else the caller goes on as with any
// retryable failure.
func (c *Crawler) proxyFailed(ctx context.Context, job *queue.Job, ri *runInfo, v *via, ferr error) (error, bool) {
	if v == nil || !errors.Is(ferr, proxy.ErrProxy) {
		return nil, false
	}
	c.rest(ctx, ri.id, v, ferr.Error())
	c.perProxy(ctx, ri.id, v, "failed")
	if c.bump(c.proxyTries, job.ID) > maxProxyTries {
		return nil, false
	}
	c.addStat(ctx, ri.id, outcome{retries: 1, kind: "proxy"})
	return queue.Snooze(jitter(100 * time.Millisecond)), true
}

// perProxy counts one event of a page's proxy (banned, failed) in the run's stats, under a kind
// of its own: "proxy URL: event", its password redacted, beside the run's totals (banned, proxy).
func (c *Crawler) perProxy(ctx context.Context, runID int64, v *via, event string) {
	c.addStat(ctx, runID, outcome{kind: "proxy " + v.px.String() + ": " + event})
}

// errBanned is the failure of a page the site banned, once its uncounted retries are spent.
var errBanned = errors.New("banned")

// banned reports why res, the answer to a request for pageURL, is a ban by the spider's rule, or
// "". A redirect is the 3xx a fetch returns unfollowed, or, for a rendered page (Chromium follows
// redirects), a final URL other than the one asked for.
func banned(b spider.Ban, pageURL string, res *fetch.Result) string {
	if res == nil || !b.Detects() {
		return ""
	}
	if slices.Contains(b.Statuses, res.Status) {
		return fmt.Sprintf("banned: status %d", res.Status)
	}
	if b.Redirect != "" {
		to := res.Location
		if to == "" && res.URL != "" && res.URL != pageURL {
			to = res.URL
		}
		if to != "" && banRegexp(b.Redirect).MatchString(to) {
			return fmt.Sprintf("banned: redirected to %s", to)
		}
	}
	if b.Body != "" && banRegexp(b.Body).Match(res.Body) {
		return fmt.Sprintf("banned: the page matches %q", b.Body)
	}
	return ""
}

var banRegexps sync.Map // pattern -> *regexp.Regexp, checked at push

func banRegexp(pattern string) *regexp.Regexp {
	if re, ok := banRegexps.Load(pattern); ok {
		return re.(*regexp.Regexp)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		re = regexp.MustCompile(`$^`) // validated at push; a Go spider's bad pattern matches nothing
	}
	banRegexps.Store(pattern, re)
	return re
}

// bannedPage handles a page the site banned: its proxy rests and its session is retired, and
// the page goes back for another proxy (and a new session) without counting an attempt, up to Ban.Retries times; then it is retried as a
// retryable failure, with the spider's backoff, and dies when out of attempts.
func (c *Crawler) bannedPage(ctx context.Context, job *queue.Job, ri *runInfo, v *via, sa *sessionArgs, why string) error {
	s := ri.settings
	c.retireSession(ctx, ri.id, sa, why)
	through := "none"
	if v != nil {
		through = v.px.String()
	}
	c.log.Info("page banned", "run", ri.id, "url", pageURL(job), "proxy", through, "cause", why)
	if v != nil {
		c.rest(ctx, ri.id, v, why)
		c.perProxy(ctx, ri.id, v, "banned")
	}
	n := c.bump(c.banTries, job.ID)
	if n <= s.Ban.Retries {
		c.addStat(ctx, ri.id, outcome{retries: 1, kind: "banned"})
		if v == nil {
			// No other address to go through: wait as a retry would.
			return queue.Snooze(s.Retry.PageBackoff(n))
		}
		return queue.Snooze(jitter(100 * time.Millisecond))
	}
	err := fmt.Errorf("%w (%s) %d times", errBanned, why, n)
	o := outcome{retries: 1, kind: "banned"}
	if job.Attempt >= job.MaxAttempts {
		o = pageDied("banned")
		c.logPageDied(ctx, ri.id, pageURL(job), job.Attempt, err)
	}
	c.addStat(ctx, ri.id, o)
	return queue.RetryIn(err, s.Retry.PageBackoff(job.Attempt))
}

// bump counts one more event of page job id in m and returns the count.
func (c *Crawler) bump(m map[int64]int, id int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(m) >= maxSoft {
		clear(m)
	}
	m[id]++
	return m[id]
}
