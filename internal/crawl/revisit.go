package crawl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/fetch"
	"crawlq/internal/items"
	"crawlq/internal/proxy"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
	"crawlq/internal/urlstate"
)

// Revisits: a spider whose spec says revisit changed_only or adaptive keeps URL state across its
// runs (internal/urlstate). Its pages ask with the last answer's validators; a page that answers
// 304, or the same body as last time, is not parsed and emits nothing, and the links it yielded
// last time are followed, so the run still reaches everything behind it (asked within its own
// job where it can: walk.go). A changed page emits its
// new and changed items only. Every page records its new state, and its items' changes, in the
// transaction that finishes it (queueStates; a page as it was rewrites only its run, times and
// validators), so a page redone after a crash sees the state it
// saw the first time. When a run ends having reached all it could, the items of the URLs it no
// longer reached are gone (sweepGone). A spider that revisits always (the default) costs none of
// this: no read, no row, no statement.

// revisit is a page of a spider that keeps URL state, with the state its URL had.
type revisit struct {
	key  urlstate.Key
	prev *urlstate.State // nil: no run of the line reached the URL yet
	s    spider.Settings
}

// revisitLoad returns the revisit of page a of run ri, or nil when its spider keeps no URL state.
func (c *Crawler) revisitLoad(ctx context.Context, ri *runInfo, a pageArgs) (*revisit, error) {
	if !ri.settings.KeepsState() || a.Sitemap != "" {
		return nil, nil // a sitemap is read whole every run: its lastmods are the change signal
	}
	rv := &revisit{key: urlstate.Key{Spider: ri.name, Line: spider.StateLine(ri.spider), URL: a.URL}, s: ri.settings}
	prev, err := c.states.Load(ctx, rv.key)
	if err != nil {
		return nil, err
	}
	rv.prev = prev
	return rv, nil
}

// reached reports whether the page's URL was reached already in run: a walk within another page's
// job recorded it (walk.go), so this job has nothing to do. A page's own record commits with its
// job, so a retried job never finds its own.
func (rv *revisit) reached(run int64) bool {
	return rv != nil && rv.prev != nil && rv.prev.RunID == run
}

// notDue reports whether an adaptive page is not due yet: it is not requested at all.
func (rv *revisit) notDue(now time.Time) bool {
	return rv != nil && rv.s.Revisit == spider.RevisitAdaptive && rv.prev != nil && rv.prev.Status == http.StatusOK && !rv.prev.Due(now)
}

// conditional reports whether the page is asked with validators: its last answer was a page.
func (rv *revisit) conditional() bool {
	return rv != nil && rv.prev != nil && rv.prev.Status == http.StatusOK && rv.s.Render != spider.RenderBrowser
}

// revisitGet fetches the page, conditionally when it has validators; sa is its session (nil:
// none).
func (c *Crawler) revisitGet(ctx context.Context, f *fetch.Fetcher, job *queue.Job, runID int64, s spider.Settings, u string, px *proxy.Proxy, rv *revisit, sa *sessionArgs) (*fetch.Result, error) {
	if !rv.conditional() {
		return c.get(ctx, f, job, runID, s, u, px, sa)
	}
	return f.FetchWith(ctx, u, fetch.Validators{ETag: rv.prev.ETag, LastModified: rv.prev.LastModified}, cookies(sa, u))
}

// unchanged reports whether res says the page is as it was: a 304, or the same body.
func (rv *revisit) unchanged(res *fetch.Result) bool {
	if rv == nil || rv.prev == nil || rv.prev.Status != http.StatusOK {
		return false
	}
	return res.Status == http.StatusNotModified || (rv.prev.BodyHash != 0 && urlstate.BodyHash(res.Body) == rv.prev.BodyHash)
}

// ended reports whether a failed fetch ends the page for good with an answer that says it is
// gone (a 404, a 410): its items are gone. Another refusal (a 401, a 403: perhaps a ban) says
// nothing of the page, and fails it as in a full crawl.
func (rv *revisit) ended(ferr error) bool {
	var se *fetch.StatusError
	return rv != nil && errors.As(ferr, &se) && (se.Code == http.StatusNotFound || se.Code == http.StatusGone)
}

// page starts the state the page records; fetched: it was requested now.
func (rv *revisit) page(runID int64, fetched bool) *urlstate.Page {
	p := &urlstate.Page{Key: rv.key, RunID: runID, Fetched: fetched, Keep: rv.s.StateKeep()}
	if rv.prev != nil {
		p.FetchedAt = rv.prev.FetchedAt
	}
	return p
}

// interval is the page's next adaptive interval (0 for changed_only).
func (rv *revisit) interval(changed bool) time.Duration {
	if rv.s.Revisit != spider.RevisitAdaptive {
		return 0
	}
	lo, hi := rv.s.RevisitBounds()
	var last time.Duration
	if rv.prev != nil {
		last = rv.prev.Interval
	}
	return urlstate.NextInterval(last, changed, lo, hi)
}

// revisitSame finishes a page that is as it was (res: its 304 or same-body answer; nil: an
// adaptive page not due, not requested): no parse, no item; its stored links are followed and its
// items counted unchanged.
func (c *Crawler) revisitSame(ctx context.Context, job *queue.Job, ri *runInfo, a pageArgs, rv *revisit, res *fetch.Result) error {
	prev := rv.prev
	p, kind := rv.same(ri.id, res)
	// A page not due counts as a page of the run (it was reached, its items are there), and
	// not_due says how many were not requested. The page's outcome is counted with its record,
	// only if that claims the URL for the run (a walk in another job may have reached it too).
	p.Kind = kind
	if res != nil {
		p.Bytes = res.Bytes
	}
	o := outcome{state: p}
	var reqs []spider.Request
	if ri.settings.MaxDepth == 0 || a.Depth+1 <= ri.settings.MaxDepth {
		reqs = make([]spider.Request, len(prev.Links))
		for i, u := range prev.Links {
			reqs[i] = spider.Request{URL: u, Depth: a.Depth + 1}
		}
	}
	follow := toPages(reqs)
	switch {
	case canWalk(ri.settings):
		// The pages behind it are asked here, not as jobs of their own (walk.go).
		w := c.walkFrom(ctx, ri, a.URL, follow)
		o.walked, follow = w.pages, w.follow
		err := c.finishPage(ctx, job, ri, o, follow)
		if !errors.Is(err, queue.ErrCompleted) {
			c.seen.remove(w.marked) // not recorded: they are to be reached again
		}
		return err
	case res != nil:
		follow = follows(a, res, reqs) // a session keeps the cookies of the answer
	default:
		for i := range follow {
			follow[i].Session = a.Session
		}
	}
	return c.finishPage(ctx, job, ri, o, follow)
}

// same is the record of a page that is as it was (res: its 304 or same-body answer; nil: an
// adaptive page not due, not requested), its links and items kept, and its outcome's kind.
func (rv *revisit) same(runID int64, res *fetch.Result) (*urlstate.Page, string) {
	prev := rv.prev
	p := rv.page(runID, res != nil)
	p.Same = true // its links and items stay as stored
	p.ETag, p.LastModified, p.Interval = prev.ETag, prev.LastModified, prev.Interval
	p.Counts.Unchanged = prev.NItems // a walk's state has the number, not the items
	if res == nil {
		return p, "not_due"
	}
	kind := "not_modified"
	if res.Status == http.StatusOK {
		kind = "unchanged_body"
	}
	if e := res.Header.Get("ETag"); e != "" {
		p.ETag = e
	}
	if lm := res.Header.Get("Last-Modified"); lm != "" {
		p.LastModified = lm
	}
	p.Interval = rv.interval(false)
	return p, kind
}

// revisitChanged compares a parsed page's items with its state: it returns the items to emit
// (the new and changed ones) and the state the page records.
func (rv *revisit) changed(runID int64, res *fetch.Result, follow []spider.Request, its []items.Item) ([]items.Item, *urlstate.Page) {
	p := rv.page(runID, true)
	p.Status, p.ETag, p.LastModified = res.Status, res.Header.Get("ETag"), res.Header.Get("Last-Modified")
	p.BodyHash = urlstate.BodyHash(res.Body)
	p.Links = make([]string, len(follow))
	for i, r := range follow {
		p.Links[i] = r.URL
	}
	now := make(map[string]string, len(its))
	for _, it := range its {
		now[it.Key] = urlstate.DataHash(it.Data)
	}
	var old map[string]string
	if rv.prev != nil {
		old = rv.prev.Items
	}
	p.Items = now
	p.Changes, p.Counts = urlstate.Diff(old, now)
	p.Interval = rv.interval(p.Counts.New+p.Counts.Changed+p.Counts.Gone > 0 || rv.prev == nil || linksChanged(rv.prev.Links, p.Links))
	emit := its[:0:0]
	for _, it := range its {
		if old[it.Key] != now[it.Key] {
			emit = append(emit, it)
		}
	}
	return emit, p
}

// linksChanged reports whether a page links another set of URLs than it did (in any order): a
// page that lists others (a listing, a hub) changed when its links did, though it has no item.
func linksChanged(old, now []string) bool {
	had := make(map[string]bool, len(old))
	for _, u := range old {
		had[u] = true
	}
	has := make(map[string]bool, len(now))
	for _, u := range now {
		if !had[u] {
			return true
		}
		has[u] = true
	}
	return len(has) != len(had)
}

// revisitEnded finishes a page whose fetch ended it with an answer that is not retried (a 404, a
// 410): recorded as fetchFailed does, and the items it yielded last time are gone.
func (c *Crawler) revisitEnded(ctx context.Context, job *queue.Job, ri *runInfo, host string, rv *revisit, ferr error, res *fetch.Result, start time.Time) error {
	c.hostAnswered(ctx, ri.id, host, start) // the host answers; the page is at fault
	p := rv.page(ri.id, true)
	if se := (*fetch.StatusError)(nil); errors.As(ferr, &se) {
		p.Status = se.Code
	}
	if rv.prev != nil {
		p.Changes, p.Counts = urlstate.Diff(rv.prev.Items, nil)
	}
	o := outcome{errors: 1, kind: fetch.Kind(ferr), state: p}
	if res != nil {
		o.bytes = res.Bytes
	}
	return c.finishPage(ctx, job, ri, o, nil)
}

// queueStates queues, on the transaction that finishes batch, the URL states and item changes
// of its pages that keep state (nothing when none does).
func queueStates(tx *queue.Tx, batch []*finishReq, now time.Time) error {
	var b urlstate.Batch
	for _, r := range batch {
		if r.o.state != nil {
			b.Add(r.o.state)
		}
		for _, p := range r.o.walked {
			b.Add(p)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return b.Queue(tx, now)
}

// sweepGone records, before run ri finishes, the items of its line's URLs it no longer reached as
// gone, when its spider keeps URL state and the run reached all it could: no dead page, no
// cancel, no error of the run, a page budget not spent (a spent one may have left pages out), a
// page fetched, and no page that failed for another reason than being gone (reachedAll).
func (c *Crawler) sweepGone(ctx context.Context, runID int64, dead int64) error {
	ri, err := c.runInfo(ctx, runID)
	if err != nil || ri.spider == nil || !ri.settings.KeepsState() || c.isCancelled(runID) {
		return nil // a run that cannot be read is finished by FinishRun alone
	}
	if dead > 0 {
		c.goneNotCounted(ctx, runID, fmt.Sprintf("%d of its pages died, so the pages behind them were not looked for", dead))
		return nil
	}
	if ri.settings.SitemapSince != "" {
		return nil // it schedules only what its sitemaps say changed: the rest was not looked for
	}
	row, err := c.db.GetRun(ctx, runID)
	if err != nil {
		return fmt.Errorf("finish run %d: %w", runID, err)
	}
	if row.CancelRequested || row.Error.String != "" || row.StartedAt == nil {
		return nil
	}
	if row.PageBudget.Valid && row.PageBudget.Int64 == 0 {
		c.goneNotCounted(ctx, runID, "the run spent its page budget (max_pages), and may not have reached every page")
		return nil
	}
	line := spider.StateLine(ri.spider)
	if ok, err := c.reachedAll(ctx, ri, line); err != nil || !ok {
		return err
	}
	n, err := urlstate.SweepGone(ctx, c.db, ri.name, line, runID)
	if err != nil {
		return fmt.Errorf("finish run %d: %w", runID, err)
	}
	if n > 0 {
		c.log.Info("items gone: their pages were not reached", "run", runID, "items", n)
	}
	return nil
}

// reachedAll reports whether run ri reached every page it could: it fetched a page, and each of
// its pages that failed (each error) answered that it is gone, a 404 or a 410 its state records.
// A page that failed otherwise (refused, banned, unparseable) did not yield its links, so the
// pages behind it were not looked for: their items are not gone, and the run's log says so.
func (c *Crawler) reachedAll(ctx context.Context, ri *runInfo, line string) (bool, error) {
	st, err := c.db.LiveRunStats(ctx, ri.id)
	if err != nil {
		return false, fmt.Errorf("finish run %d: %w", ri.id, err)
	}
	var gone int64
	if st.Errors > 0 {
		if gone, err = c.db.CountRunGonePages(ctx, dbsqlc.CountRunGonePagesParams{Spider: ri.name, Line: line, RunID: ri.id}); err != nil {
			return false, fmt.Errorf("finish run %d: %w", ri.id, err)
		}
	}
	why := ""
	switch {
	case st.Pages == 0:
		why = "it fetched no page"
	case st.Errors > gone:
		why = fmt.Sprintf("%d of its pages failed (not a 404 or a 410), so the pages behind them were not looked for", st.Errors-gone)
	default:
		return true, nil
	}
	c.goneNotCounted(ctx, ri.id, why)
	return false, nil
}

// goneNotCounted says in the process log and run runID's log that the run did not count the items
// of the pages it did not reach as gone, and why.
func (c *Crawler) goneNotCounted(ctx context.Context, runID int64, why string) {
	c.log.Info("items of pages not reached are not counted gone", "run", runID, "why", why)
	c.pageLog().Note(ctx, runID, c.clk.Now(), "items of pages not reached are not counted gone: "+why)
}
