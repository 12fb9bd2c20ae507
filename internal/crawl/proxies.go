package crawl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"crawlq/internal/fetch"
	"crawlq/internal/proxy"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
)

// The pages of a spider with proxies (Settings.Proxies) go through them in turn, their
// robots.txt too: one proxy.Rotation per spider's list in this process. A proxy that fails
// (proxy.ErrProxy: unreachable, credentials refused, no tunnel) or whose page is banned
// (Settings.Ban) is rested with a doubling backoff; that is said in the process log and the
// run's log (once per rest, the password redacted) and counted in the run's stats (kinds
// "proxy" and "banned"). The page is put back at once to go through another proxy, without
// counting an attempt, up to maxProxyTries proxy failures or Ban.Retries bans of the page in
// this process; past them they count as any retryable failure. While every proxy rests, pages
// wait for the first one back.

// maxProxyTries bounds the uncounted retries of one page whose proxy failed.
const maxProxyTries = 10

// via is the proxy a page goes through, from its spider's rotation; nil: direct.
type via struct {
	rot *proxy.Rotation
	px  *proxy.Proxy
}

func (v *via) proxy() *proxy.Proxy {
	if v == nil {
		return nil
	}
	return v.px
}

// rotation returns this process's rotation of a spider's proxies, their ${CRAWLQ_PROXY_...}
// variables filled from Config.LookupEnv.
func (c *Crawler) rotation(s spider.Settings) (*proxy.Rotation, error) {
	key := strings.Join(s.Proxies, "\n")
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.rotations[key]; r != nil {
		return r, nil
	}
	lookup := c.cfg.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	ps := make([]*proxy.Proxy, len(s.Proxies))
	for i, raw := range s.Proxies {
		exp, err := proxy.Expand(raw, lookup)
		if err == nil {
			ps[i], err = proxy.Parse(exp)
		}
		if err != nil {
			return nil, fmt.Errorf("proxies[%d]: %w", i, err)
		}
	}
	r := proxy.NewRotation(ps, c.cfg.ProxyRest, 0)
	c.rotations[key] = r
	return r, nil
}

// pickProxy chooses the proxy of a page: nil for a spider without proxies; an error to return
// (a snooze while every proxy rests, or a spider whose proxies cannot be read).
func (c *Crawler) pickProxy(s spider.Settings) (*via, error) {
	if len(s.Proxies) == 0 {
		return nil, nil
	}
	rot, err := c.rotation(s)
	if err != nil {
		return nil, queue.Permanent(err)
	}
	px, wait := rot.Next(time.Now())
	if px == nil {
		return nil, queue.Snooze(wait + jitter(min(wait/4, time.Second)+time.Millisecond))
	}
	return &via{rot: rot, px: px}, nil
}

// rest benches a page's proxy for cause, said once per rest in the logs.
func (c *Crawler) rest(ctx context.Context, runID int64, v *via, cause string) {
	d, fresh := v.rot.Rest(v.px, time.Now())
	if fresh {
		c.log.Warn("proxy rested", "run", runID, "proxy", v.px.String(), "for", d, "cause", cause)
		c.pageLog().ProxyRested(ctx, runID, c.clock(), v.px.String(), cause, d)
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
	if c.bump(c.proxyTries, job.ID) > maxProxyTries {
		return nil, false
	}
	c.addStat(ctx, ri.id, outcome{retries: 1, kind: "proxy"})
	return queue.Snooze(jitter(100 * time.Millisecond)), true
}

// errBanned is the failure of a page the site banned, once its uncounted retries are spent.
var errBanned = errors.New("banned")

// banned reports why res is a ban by the spider's rule, or "".
func banned(b spider.Ban, res *fetch.Result) string {
	if res == nil || !b.Detects() {
		return ""
	}
	if slices.Contains(b.Statuses, res.Status) {
		return fmt.Sprintf("banned: status %d", res.Status)
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
	c.retireSession(ri.id, sa, why)
	if v != nil {
		c.rest(ctx, ri.id, v, why)
	} else {
		c.log.Warn("page banned", "run", ri.id, "url", pageURL(job), "cause", why)
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
		o = outcome{errors: 1, kind: "banned"}
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
