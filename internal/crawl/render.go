package crawl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"crawlq/internal/browser"
	"crawlq/internal/fetch"
	"crawlq/internal/proxy"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
)

// Pages of a spider with render: browser are rendered by headless Chromium (internal/browser)
// instead of fetched, on the processes whose Config.Browser is set: the ECS runners and crawlq
// local's. The rendered DOM then goes through the same parse, items, politeness, robots.txt
// (fetched plainly), once keys, retries and outcomes as a fetched page. A process without it
// leaves such pages to one that has it. A crash of Chromium costs the page no attempt, up to
// maxCrashes times a page (a page that crashes every browser then counts its attempts).

// maxCrashes bounds the uncounted renders of one page that Chromium crashed under.
const maxCrashes = 3

// browserKey is what a pool of browsers is shared by: the address guard and user agent are
// per pool.
type browserKey struct {
	ua      string
	private bool
}

// browserPool returns this process's pool of browsers for a spider's settings, starting it at
// the first browser page (no Chromium runs until one comes). It returns nil when this process
// renders no pages.
func (c *Crawler) browserPool(s spider.Settings) (*browser.Pool, error) {
	if c.cfg.Browser == nil {
		return nil, nil
	}
	k := browserKey{ua: s.UserAgent, private: s.AllowPrivate}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.browsers[k]; p != nil {
		return p, nil
	}
	cfg := *c.cfg.Browser
	cfg.UserAgent, cfg.AllowPrivate = s.UserAgent, s.AllowPrivate
	cfg.AllowLoopback = cfg.AllowLoopback || c.cfg.Fetch.AllowLoopback
	if cfg.Logger == nil {
		cfg.Logger = c.log
	}
	p, err := browser.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("start browsers: %w", err)
	}
	c.browsers[k] = p
	return p, nil
}

// closeBrowsers stops every browser this process started.
func (c *Crawler) closeBrowsers() {
	c.mu.Lock()
	pools := c.browsers
	c.browsers = map[browserKey]*browser.Pool{}
	c.mu.Unlock()
	for _, p := range pools {
		if err := p.Close(); err != nil {
			c.log.Warn("close browsers", "err", err)
		}
	}
}

// errNoBrowser: this process renders no pages (Config.Browser is nil).
var errNoBrowser = errors.New("this process renders no browser pages")

// get fetches a page as its spider says: a plain fetch, or a render by Chromium.
// px is the page's proxy (nil: direct); f already goes through it. sa is its session (nil:
// none): a fetch sends its cookies for u; a rendered page's browser context starts with all of
// them, and the cookies the page set come back as Set-Cookie lines of the result's header,
// which its follow-ups' session keeps (sessions.go). A rendered page that fails keeps its
// screenshot and HTML in run runID's artifacts (artifacts.go).
func (c *Crawler) get(ctx context.Context, f *fetch.Fetcher, job *queue.Job, runID int64, s spider.Settings, u string, px *proxy.Proxy, sa *sessionArgs) (*fetch.Result, error) {
	if s.Render != spider.RenderBrowser {
		return f.FetchWith(ctx, u, fetch.Validators{}, cookies(sa, u))
	}
	pool, err := c.browserPool(s)
	if err != nil {
		return nil, queue.Permanent(err) // no Chromium here: say so on the page, not forever in a loop
	}
	if pool == nil {
		return nil, errNoBrowser
	}
	r, err := pool.Render(ctx, browser.Request{URL: u, WaitFor: s.WaitFor, ScrollToBottom: s.Scroll, ScreenshotOnFailure: true, Proxy: px,
		Cookies: sa.browserCookies(c.clk.Now())})
	if errors.Is(err, browser.ErrBrowserCrashed) && c.crashedUnder(job.ID) <= maxCrashes {
		c.log.Warn("browser crashed under a page; put back without counting an attempt", "url", u, "err", err)
		return nil, queue.Defer(err)
	}
	if r == nil {
		return nil, err
	}
	if err != nil && ctx.Err() == nil && !errors.Is(err, proxy.ErrProxy) { // a proxy's failure is the proxy's, said as such
		c.keepFailedPage(ctx, runID, job, u, r, err)
	}
	body := []byte(r.HTML)
	h := r.Header
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "text/html; charset=utf-8") // the serialized DOM, whatever the document was served as
	if sa != nil {
		// What the browser context holds is the whole of what the page set, scripts included.
		h.Del("Set-Cookie")
		for _, line := range sa.newCookies(r.URL, r.Cookies) {
			h.Add("Set-Cookie", line)
		}
	}
	return &fetch.Result{URL: r.URL, Status: r.Status, Header: h, Body: body, ContentType: "text/html", Bytes: int64(len(body))}, err
}

// crashedUnder counts a crash of Chromium under page job id and returns how many it has met.
func (c *Crawler) crashedUnder(id int64) int { return c.bump(c.crashes, id) }

// pageSettings are the settings page a is fetched with: its run's, with the render of the rule that
// found it. A browser page that reached a process that renders none is put back for a runner.
func (c *Crawler) pageSettings(ri *runInfo, a pageArgs) (spider.Settings, error) {
	s := ri.settings
	if a.Render != "" {
		s.Render = a.Render // the rule that found the page says how to fetch it
	}
	if s.Render == spider.RenderBrowser && c.cfg.Browser == nil {
		// Not this process's page: a process that renders pages (a runner) takes it.
		c.log.Warn("a browser page reached a process that renders none; put back for a runner", "run", ri.id, "url", a.URL)
		return s, queue.Snooze(10 * time.Second)
	}
	return s, nil
}
