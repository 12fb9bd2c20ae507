package crawl

import (
	"context"
	"net/url"
	"sync"
	"time"

	"crawlq/internal/fetch"
	"crawlq/internal/robots"
	"crawlq/internal/spider"
	"crawlq/internal/urlstate"
)

// Walks: a page of a spider that keeps URL state, found as it was (a 304, the same body, an
// adaptive page not due), asks the pages behind it itself, inside its own job, instead of making
// each a page job: a recrawl of a site that has not changed is then a few jobs, not one a page.
// The walk reads the states of the page's stored links in one statement, asks each with its
// validators (holding its host as a page job would, after robots.txt), and goes on from the
// links of those found as they were, a level at a time, up to walkMax pages or walkFor. A page
// that changed, answers otherwise, fails, has no state or is not reached within the bounds
// becomes a page job as before (so a failure is retried by the job path, not the walk's).
//
// The pages walked are recorded in the transaction that finishes the walking page (fenced by its
// lease): a worker killed mid-walk commits nothing of it, and the walking page, retried, walks
// again. Each record claims its URL for the run (urlstate.Batch), so a URL reached by two walks,
// or by a walk and its own job, counts once. While a walk is under way its URLs are marked as
// seen in this process, so the process's other pages do not queue or walk them too; a walk that
// does not commit unmarks them.

const (
	walkMax   = 4096             // pages one walk asks
	walkFor   = 20 * time.Second // a walk asks no more pages after this (its lease is renewed meanwhile)
	walkFetch = 16               // requests a walk has in flight at most (and no more than the spider's concurrency)
)

// walk is what a walk found: the pages it recorded and the links left to page jobs.
type walk struct {
	pages  []*urlstate.Page
	follow []pageArgs
	marked []seenKey // the walked URLs: seen in this process, unmarked if the walk does not commit
}

// canWalk reports whether pages of run ri may be walked: their spider keeps URL state and fetches
// them plainly, each page alike (no page budget to take from, no proxy, session, ban rule or
// browser, which the page job's path handles).
func canWalk(s spider.Settings) bool {
	return s.KeepsState() && s.MaxPages == 0 && s.Render != spider.RenderBrowser && !s.RulesRender &&
		len(s.Proxies) == 0 && s.Sessions <= 0 && !s.Ban.Detects()
}

// walkFrom walks the pages behind page self (its stored links, already at their depth).
func (c *Crawler) walkFrom(ctx context.Context, ri *runInfo, self string, links []pageArgs) *walk {
	w := &walk{}
	line := spider.StateLine(ri.spider)
	deadline := c.clk.Now().Add(walkFor)
	ask := c.walkAskers(ctx, ri)
	defer ask.stop()
	frontier := c.walkMark(ri, self, links)
	for len(frontier) > 0 && len(w.pages) < walkMax && c.clk.Now().Before(deadline) && ctx.Err() == nil && !c.isCancelled(ri.id) {
		level := frontier[:min(len(frontier), walkMax-len(w.pages))]
		rest := frontier[len(level):]
		next, left := c.walkLevel(ctx, ri, line, level, w, ask)
		w.follow = append(w.follow, left...)
		frontier = append(rest, c.walkMark(ri, self, next)...)
	}
	w.follow = append(w.follow, frontier...)
	// The links left to page jobs are unmarked, so discover queues them.
	c.seen.remove(seenKeys(ri.id, w.follow))
	w.marked = make([]seenKey, len(w.pages))
	for i, p := range w.pages {
		w.marked[i] = seenKeyOf(ri.id, p.Key.URL)
	}
	c.log.Debug("walked the pages behind an unchanged page", "run", ri.id, "url", self, "walked", len(w.pages), "jobs", len(w.follow))
	return w
}

// walkMark returns the links not yet known to this process (queued, walked or being walked),
// depth allowing, and marks them seen; the walking page itself (self) is never among them.
func (c *Crawler) walkMark(ri *runInfo, self string, links []pageArgs) []pageArgs {
	if ri.settings.MaxDepth > 0 {
		keep := links[:0]
		for _, l := range links {
			if l.Depth <= ri.settings.MaxDepth {
				keep = append(keep, l)
			}
		}
		links = keep
	}
	keep := links[:0]
	for _, l := range links {
		if l.URL != self {
			keep = append(keep, l)
		}
	}
	// mark keeps a link once however often it repeats (it marks the first it returns).
	return c.seen.mark(ri.id, keep)
}

// walkLevel asks the pages of one level: their states in one statement, then each with its
// validators. It records those found as they were in w and returns their stored links (the next
// level) and the pages left to jobs.
func (c *Crawler) walkLevel(ctx context.Context, ri *runInfo, line string, level []pageArgs, w *walk, ask *walkAskers) (next, left []pageArgs) {
	urls := make([]string, len(level))
	for i, p := range level {
		urls[i] = p.URL
	}
	states, err := urlstate.LoadWalk(ctx, c.db, ri.name, line, urls)
	if err != nil {
		c.log.Warn("walk: read url states; the pages become jobs", "run", ri.id, "pages", len(level), "err", err)
		return nil, level
	}
	results := make([]walkReq, len(level))
	var done sync.WaitGroup
	for i, a := range level {
		r := &results[i]
		r.a, r.prev, r.done = a, states[a.URL], &done
		if (&revisit{prev: r.prev, s: ri.settings}).conditional() {
			r.key = urlstate.Key{Spider: ri.name, Line: line, URL: a.URL}
			done.Add(1)
			ask.ask(r)
		} // else no state, or its last answer was not a page: its job fetches and parses it
	}
	done.Wait()
	for _, r := range results {
		if r.page == nil {
			left = append(left, r.a)
			continue
		}
		w.pages = append(w.pages, r.page)
		for _, u := range r.prev.Links {
			next = append(next, pageArgs{URL: u, Depth: r.a.Depth + 1})
		}
	}
	return next, left
}

// walkReq is a page of a walk to ask, and what asking it found (page nil: left to a page job).
type walkReq struct {
	a    pageArgs
	key  urlstate.Key
	prev *urlstate.State
	page *urlstate.Page
	done *sync.WaitGroup
}

// walkAskers are the goroutines that ask a walk's pages, up to walkFetch (and the spider's
// concurrency) at once. They live as long as the walk and ask page after page, started as the
// pages wait for one, rather than a goroutine a page: each grows its stack through net/http
// once a walk, not once a page (7% of a recrawl's CPU).
type walkAskers struct {
	c       *Crawler
	ctx     context.Context
	ri      *runInfo
	reqs    chan *walkReq
	started int
	max     int
	wg      sync.WaitGroup
}

func (c *Crawler) walkAskers(ctx context.Context, ri *runInfo) *walkAskers {
	return &walkAskers{c: c, ctx: ctx, ri: ri, reqs: make(chan *walkReq), max: max(1, min(walkFetch, ri.settings.Concurrency))}
}

// ask hands r to an idle asker, or to a new one while fewer than max run, or else waits for one.
func (w *walkAskers) ask(r *walkReq) {
	select {
	case w.reqs <- r:
		return
	default:
	}
	if w.started < w.max {
		w.started++
		w.wg.Go(func() {
			for r := range w.reqs {
				r.page = w.c.walkAsk(w.ctx, w.ri, r.a, &revisit{key: r.key, prev: r.prev, s: w.ri.settings})
				r.done.Done()
			}
		})
	}
	w.reqs <- r
}

// stop ends the askers (none is asking: every level waits for its pages).
func (w *walkAskers) stop() {
	close(w.reqs)
	w.wg.Wait()
}

// walkAsk asks one page of a walk as its job would (robots.txt, its host's health and slots, its
// validators) and returns its record when it is as it was; nil leaves it to a page job.
func (c *Crawler) walkAsk(ctx context.Context, ri *runInfo, a pageArgs, rv *revisit) *urlstate.Page {
	if rv.notDue(c.clk.Now()) {
		p, kind := rv.same(ri.id, nil)
		p.Kind, p.Walked = kind, true
		return p
	}
	s, err := c.pageSettings(ri, a)
	if err != nil {
		return nil
	}
	// A walked URL is a stored link, canonical already, so its parsed host is urlx.Host's
	// (which canonicalises and parses it again: 6% of a recrawl's CPU in this process); the
	// request is sent from this parse too.
	u, err := url.Parse(a.URL)
	if err != nil {
		return nil
	}
	host := u.Host
	if c.hostPaused(host) != nil {
		return nil
	}
	f, err := c.fetcher(s, nil)
	if err != nil {
		return nil
	}
	if s.ObeyRobots {
		origin, err := robots.RobotsURLOf(u)
		if err != nil {
			return nil
		}
		pol, wait, err := c.policyAt(ctx, ri, f, nil, origin, a.URL)
		if err != nil || wait > 0 {
			return nil
		}
		if !pol.Allowed(s.UserAgent, u.RequestURI()) {
			return nil // its job records it disallowed
		}
	}
	release, err := c.takeHost(ctx, host, s)
	if err != nil {
		return nil // busy: its job waits its turn
	}
	start := c.clk.Now()
	res, ferr := f.FetchURL(ctx, u, fetch.Validators{ETag: rv.prev.ETag, LastModified: rv.prev.LastModified}, nil)
	release()
	if ferr != nil || res.Location != "" || !rv.unchanged(res) {
		return nil // changed, moved or failed: its job handles it (and retries it)
	}
	ri.fetched.Store(true)
	c.hostAnswered(ctx, ri.id, host, start)
	p, kind := rv.same(ri.id, res)
	p.Kind, p.Bytes, p.Walked = kind, res.Bytes, true
	return p
}

// seenKeys returns the seen keys of pages of run.
func seenKeys(run int64, pages []pageArgs) []seenKey {
	keys := make([]seenKey, len(pages))
	for i, p := range pages {
		keys[i] = seenKeyOf(run, p.URL)
	}
	return keys
}
