package crawl

import (
	"cmp"
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"time"

	"crawlq/internal/browser"
	"crawlq/internal/dbsqlc"
	"crawlq/internal/fetch"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
)

// A spider with sessions (Settings.Sessions = N) crawls as N visitors: its start pages are dealt
// to sessions 1..N, and each page's follow-ups (and redirects) stay in its session. A session is
// a cookie jar and, for a spider with proxies, one proxy: both travel in the page jobs' args, so
// a follow-up taken by another worker process, or after a crash, is still in its session. A
// session whose page is banned, or whose proxy rests, is retired for every worker process (a row
// in crawlq_session, which each process reads for a run at most once per retiredSync): the page,
// and every other page of the session wherever it runs, goes on in a new session (no cookies,
// the next proxy in turn), said in the process log.
//
// Cookies are kept as the Set-Cookie lines received with the URL they came with, replayed into a
// cookie jar (net/http/cookiejar: its domain, path, expiry and secure rules) for each request;
// the most recent maxSessionCookies are kept. A rendered page's browser context starts with the
// session's cookies (browserCookies), and those it holds after the page that the session did not
// (newCookies: set by a response or a script) are kept as Set-Cookie lines of the page's answer.

// maxSessionCookies bounds the cookies a session carries in each page job's args.
const maxSessionCookies = 32

// sessionArgs is a page's session, in its job's args.
type sessionArgs struct {
	ID      int64           `json:"id"`
	Proxy   int             `json:"proxy,omitempty"` // 1 + index in the spider's proxies; 0: none chosen yet
	Cookies []sessionCookie `json:"cookies,omitempty"`
}

type sessionCookie struct {
	URL string `json:"u"` // the URL whose response set it
	Set string `json:"c"` // the Set-Cookie line
}

// dealSessions gives start pages their sessions, 1..N in turn.
func dealSessions(s spider.Settings, ps []pageArgs) []pageArgs {
	if s.Sessions <= 0 {
		return ps
	}
	for i := range ps {
		ps[i].Session = &sessionArgs{ID: int64(i%s.Sessions) + 1}
	}
	return ps
}

// jar rebuilds a session's cookie jar.
func (sa *sessionArgs) jar() http.CookieJar {
	j, _ := cookiejar.New(nil) // no options, no error
	for _, sc := range sa.Cookies {
		u, err := url.Parse(sc.URL)
		if err != nil {
			continue
		}
		if ck, err := http.ParseSetCookie(sc.Set); err == nil {
			j.SetCookies(u, []*http.Cookie{ck})
		}
	}
	return j
}

// browserCookies are the session's cookies for a rendered page's browser context: each as its
// latest Set-Cookie line left it (one removed or expired since is left out), with the URL that
// set it; now tells which have expired.
func (sa *sessionArgs) browserCookies(now time.Time) []browser.Cookie {
	if sa == nil || len(sa.Cookies) == 0 {
		return nil
	}
	type key struct{ name, domain, path string }
	at := map[key]int{}
	var all []browser.Cookie
	for _, sc := range sa.Cookies {
		ck, err := http.ParseSetCookie(sc.Set)
		u, uerr := url.Parse(sc.URL)
		if err != nil || uerr != nil {
			continue
		}
		k := key{ck.Name, strings.ToLower(cmp.Or(strings.TrimPrefix(ck.Domain, "."), u.Hostname())), ck.Path}
		if i, ok := at[k]; ok {
			all[i].Cookie = nil // replaced, or removed below
			delete(at, k)
		}
		if ck.MaxAge < 0 || (!ck.Expires.IsZero() && ck.Expires.Before(now)) {
			continue
		}
		at[k] = len(all)
		all = append(all, browser.Cookie{URL: sc.URL, Cookie: ck})
	}
	return slices.DeleteFunc(all, func(c browser.Cookie) bool { return c.Cookie == nil })
}

// newCookies returns, as Set-Cookie lines of a response from pageURL, the cookies of a rendered
// page's browser context (got) that the session does not hold with the same value: what the
// page set. A host-only cookie of another host than pageURL's (set by a request of the page to
// another site) is left out, since the lines are kept as pageURL's.
func (sa *sessionArgs) newCookies(pageURL string, got []*http.Cookie) []string {
	page, err := url.Parse(pageURL)
	if sa == nil || err != nil {
		return nil
	}
	jar := sa.jar()
	var lines []string
	for _, c := range got {
		hostOnly := !strings.HasPrefix(c.Domain, ".")
		host := strings.TrimPrefix(c.Domain, ".")
		if hostOnly && !strings.EqualFold(host, page.Hostname()) {
			continue
		}
		scheme := "http"
		if c.Secure {
			scheme = "https"
		}
		held := jar.Cookies(&url.URL{Scheme: scheme, Host: host, Path: cmp.Or(c.Path, "/")})
		if slices.ContainsFunc(held, func(h *http.Cookie) bool { return h.Name == c.Name && h.Value == c.Value }) {
			continue
		}
		line := *c
		if hostOnly {
			line.Domain = ""
		}
		lines = append(lines, line.String())
	}
	return lines
}

// after returns the session a page's follow-ups carry: its cookies with those the page's
// response (from pageURL, with header h) set, and its proxy.
func (sa *sessionArgs) after(pageURL string, h http.Header) *sessionArgs {
	if sa == nil {
		return nil
	}
	next := &sessionArgs{ID: sa.ID, Proxy: sa.Proxy, Cookies: append([]sessionCookie(nil), sa.Cookies...)}
	for _, line := range h.Values("Set-Cookie") {
		next.Cookies = append(next.Cookies, sessionCookie{URL: pageURL, Set: line})
	}
	if n := len(next.Cookies); n > maxSessionCookies {
		next.Cookies = next.Cookies[n-maxSessionCookies:]
	}
	return next
}

// follows are a page's follow-ups, in its session (with the cookies its response set).
func follows(a pageArgs, res *fetch.Result, reqs []spider.Request) []pageArgs {
	ps := toPages(reqs)
	if a.Session == nil {
		return ps
	}
	sa := a.Session.after(res.URL, res.Header)
	for i := range ps {
		ps[i].Session = sa
	}
	return ps
}

// retireSession ends a run's session for every worker process (its row in crawlq_session; in this
// process only when that cannot be written, said in its log): its pages go on in new sessions.
func (c *Crawler) retireSession(ctx context.Context, runID int64, sa *sessionArgs, why string) {
	if sa == nil {
		return
	}
	c.retiredHere(runID, sa.ID)
	err := c.db.RetireSession(context.WithoutCancel(ctx), dbsqlc.RetireSessionParams{RunID: runID, Session: sa.ID})
	if err != nil {
		c.log.Warn("could not retire a session for every worker; retired in this process only", "run", runID, "session", sa.ID, "err", err)
	}
	c.log.Info("session retired", "run", runID, "session", sa.ID, "cause", why)
}

// retiredSync bounds how stale this process's view of the sessions other processes retired is:
// each process reads a run's retired sessions at most once per retiredSync (one query for all of
// them), not once per page. A page of a session another process retired less than retiredSync
// ago may still go out in it, as a page already in flight there would have.
const retiredSync = time.Second

// retiredView is what this process knows of a run's retired sessions.
type retiredView struct {
	ids    map[int64]bool
	readAt time.Time // when the shared rows were last read (zero: never)
}

// retiredHere remembers in this process that a run's session is retired.
func (c *Crawler) retiredHere(runID, id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retiredOf(runID).ids[id] = true
}

// retiredOf is run runID's view; c.mu is held. The views of at most maxSoft runs are kept (past
// that they are all forgotten and read again).
func (c *Crawler) retiredOf(runID int64) *retiredView {
	v := c.retired[runID]
	if v == nil {
		if len(c.retired) >= maxSoft {
			clear(c.retired)
		}
		v = &retiredView{ids: map[int64]bool{}}
		c.retired[runID] = v
	}
	return v
}

// isRetired reports whether a run's session was retired, here or by another process (as of at
// most retiredSync ago). A failed read counts as not retired (said in the log): the page keeps
// its session, as it would have before the other process's ban.
func (c *Crawler) isRetired(ctx context.Context, runID, id int64) bool {
	now := c.clk.Now()
	c.mu.Lock()
	v := c.retiredOf(runID)
	retired := v.ids[id]
	stale := v.readAt.IsZero() || now.Sub(v.readAt) >= retiredSync
	if stale {
		v.readAt = now // the pages that come meanwhile go on with this view, not a read each
	}
	c.mu.Unlock()
	if retired || !stale {
		return retired
	}
	ids, err := c.db.RetiredSessions(ctx, runID)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("could not read which sessions other workers retired; the page keeps its session", "run", runID, "session", id, "err", err)
		}
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v = c.retiredOf(runID)
	for _, r := range ids {
		v.ids[r] = true
	}
	return v.ids[id]
}

// session returns the session a page is fetched in, and its proxy (via, nil without proxies):
// its own, or a new one when it was retired or its proxy rests. err is a snooze while every
// proxy rests, or a spider whose proxies cannot be read.
func (c *Crawler) session(ctx context.Context, ri *runInfo, a *pageArgs) (*via, error) {
	s := ri.settings
	if s.Sessions <= 0 || a.Session == nil {
		return c.pickProxy(ctx, s)
	}
	if c.isRetired(ctx, ri.id, a.Session.ID) {
		a.Session = &sessionArgs{ID: randToken()}
	}
	if len(s.Proxies) == 0 {
		return nil, nil
	}
	if a.Session.Proxy > 0 {
		ps, err := c.rotation(s)
		if err != nil {
			return nil, queue.Permanent(err)
		}
		c.sync(ctx, ps)
		px, inTurn := ps.rot.At(a.Session.Proxy-1, c.clk.Now())
		if inTurn {
			return &via{ps: ps, px: px}, nil
		}
		c.retireSession(ctx, ri.id, a.Session, "its proxy rests")
		a.Session = &sessionArgs{ID: randToken()}
	}
	v, err := c.pickProxy(ctx, s)
	if v != nil {
		a.Session.Proxy = v.ps.rot.Index(v.px) + 1
	}
	return v, err
}

// cookies are what a page's request carries from its session.
func cookies(sa *sessionArgs, rawURL string) []*http.Cookie {
	if sa == nil || len(sa.Cookies) == 0 {
		return nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	return sa.jar().Cookies(u)
}
