package crawl

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/db"
	"crawlq/internal/dbsqlc"
	"crawlq/internal/fetch"
	"crawlq/internal/items"
	"crawlq/internal/proxy"
	"crawlq/internal/queue"
	"crawlq/internal/robots"
	"crawlq/internal/spider"
	"crawlq/internal/urlstate"
	"crawlq/internal/urlx"
)

// CommandRunner runs a command spider's run (the ECS runner provides one) with the spider's
// settings, the run's overrides applied. It returns when the command has exited; its error
// decides the run job's fate like any handler's.
type CommandRunner func(ctx context.Context, run *Run, spec spider.CommandSpec, settings spider.Settings) error

// SetCommandRunner lets this process run command spiders.
func (c *Crawler) SetCommandRunner(r CommandRunner) { c.mu.Lock(); c.command = r; c.mu.Unlock() }

type pageArgs struct {
	URL   string `json:"url"`
	Depth int    `json:"depth"`
	// Hops counts redirects followed to reach URL; a chain longer than maxHops is an error.
	Hops int `json:"hops,omitempty"`
	// Render, when set, is how the page is fetched instead of its spider's render (a follow
	// rule's render: render.go).
	Render string `json:"render,omitempty"`
	// Session is the page's session (sessions.go); nil for a spider without sessions.
	Session *sessionArgs `json:"session,omitempty"`
	// Sitemap marks a sitemap file or a robots.txt read for its Sitemap: lines (sitemap.go).
	Sitemap string `json:"sitemap,omitempty"`
	// Since, with Sitemap: only the URLs whose lastmod is later (Unix nanoseconds; 0: all).
	Since int64 `json:"since,omitempty"`
}

// maxHops bounds a redirect chain (each hop is its own page job).
const maxHops = 10

func toPages(reqs []spider.Request) []pageArgs {
	ps := make([]pageArgs, len(reqs))
	for i, r := range reqs {
		ps[i] = pageArgs{URL: r.URL, Depth: r.Depth, Render: r.Render}
	}
	return ps
}

// workRun starts a run: the spider's start requests become page jobs.
func (c *Crawler) workRun(ctx context.Context, job *queue.Job) error {
	ri, err := c.runInfo(ctx, job.ParentID)
	if errors.Is(err, ErrRunNotFound) || errors.Is(err, ErrInvalid) {
		c.recordRunError(ctx, job.ParentID, err)
		return queue.Permanent(err)
	}
	if err != nil {
		return err
	}
	if ri.spider == nil {
		return c.runCommand(ctx, job, ri)
	}
	reqs, err := ri.spider.StartRequests(ctx, ri.run.Args)
	if err != nil {
		c.recordRunError(ctx, ri.id, fmt.Errorf("start requests: %w", err))
		return queue.Permanent(err)
	}
	starts, err := c.sitemapStarts(ctx, ri, reqs)
	if err != nil {
		return err
	}
	added := 0
	err = c.inTx(ctx, func(tx pgx.Tx) error {
		db := c.db.WithTx(tx)
		if err := db.StartRun(ctx, ri.id); err != nil {
			return err
		}
		// The run records the stored version it starts with (a pinned one is there already), so
		// its later pages, in any process, run it too, and status and listjobs say what it ran.
		if err := c.recordVersion(ctx, db, ri); err != nil {
			return err
		}
		n, err := c.addPages(ctx, tx, ri, append(dealSessions(ri.settings, toPages(reqs)), starts...))
		if err != nil {
			return err
		}
		added = n
		return c.cfg.Queue.CompleteTx(ctx, tx, job.Lease())
	})
	if err != nil {
		return err
	}
	c.log.Info("run started", "run", ri.id, "spider", ri.name, "start_pages", added)
	c.started(ri.id)
	c.enqueued(ri, added)
	return queue.ErrCompleted
}

func (c *Crawler) runCommand(ctx context.Context, job *queue.Job, ri *runInfo) error {
	c.mu.Lock()
	run := c.command
	c.mu.Unlock()
	if run == nil || ri.command == nil {
		// Not this process's job: a runner that can run commands will take it.
		return queue.Snooze(10 * time.Second)
	}
	if err := c.db.StartRun(ctx, ri.id); err != nil {
		return err
	}
	// Before the command starts, so what it looks up by the run (a Scrapy project's egg) is of
	// the version this spec came from.
	if err := c.recordVersion(ctx, c.db, ri); err != nil {
		return err
	}
	c.started(ri.id)
	spec := *ri.command
	spec.Command = append([]string(nil), spec.Command...)
	if err := run(ctx, ri.run, spec, ri.settings); err != nil { // settings with the run's overrides
		if errors.Is(context.Cause(ctx), queue.ErrCancelRequested) {
			// The run was cancelled and its command has stopped: the job ends cancelled now and
			// the run shows cancelled at once, not at the next sweep (a minute on AWS).
			if cerr := c.cancelPage(ctx, job, err); !errors.Is(cerr, errPageCancelled) {
				return cerr
			}
			c.finishCheck(ctx, ri.id)
			return queue.ErrCompleted
		}
		// Only an attempt that will not be retried says why the run failed: a retried attempt may
		// still succeed, and the run would otherwise finish as failed.
		if queue.IsPermanent(err) || job.Attempt >= job.MaxAttempts {
			c.recordRunError(ctx, ri.id, err)
		}
		return err
	}
	if err := c.cfg.Queue.Complete(ctx, job.Lease()); err != nil {
		return err
	}
	c.finishCheck(ctx, ri.id)
	return queue.ErrCompleted
}

// recordVersion records the stored version run ri starts with, unless it has one on record.
func (c *Crawler) recordVersion(ctx context.Context, db *dbsqlc.Queries, ri *runInfo) error {
	if ri.version == "" {
		return nil // known only in-process: there is no version to record
	}
	if err := db.StartSpecRun(ctx, dbsqlc.StartSpecRunParams{RunID: ri.id, Spider: ri.name, Version: ri.version}); err != nil {
		return fmt.Errorf("record run %d version: %w", ri.id, err)
	}
	return nil
}

// started tells Config.OnStart that a run's start committed.
func (c *Crawler) started(runID int64) {
	if c.cfg.OnStart != nil {
		c.cfg.OnStart(runID)
	}
}

// RecordItems adds n items and bytes to a run's stats (command spiders report through this).
func (c *Crawler) RecordItems(ctx context.Context, runID int64, n int, bytes int64) error {
	return c.db.AddRunStat(ctx, dbsqlc.AddRunStatParams{RunID: runID, Items: int32(n), Bytes: bytes, N: 1})
}

// RecordCommandStats adds what a command spider reported at its end (Scrapy's final stats) to a
// run's stats: pages fetched, and errors by kind (each kind's count is its errors).
func (c *Crawler) RecordCommandStats(ctx context.Context, runID int64, pages int64, errorsByKind map[string]int64) error {
	if pages > 0 {
		if err := c.db.AddRunStat(ctx, dbsqlc.AddRunStatParams{RunID: runID, Pages: int32(pages), N: 1}); err != nil {
			return fmt.Errorf("record run %d stats: %w", runID, err)
		}
	}
	for kind, n := range errorsByKind {
		if n <= 0 {
			continue
		}
		err := c.db.AddRunStat(ctx, dbsqlc.AddRunStatParams{RunID: runID, Errors: int32(n), Kind: kind, N: int32(n)})
		if err != nil {
			return fmt.Errorf("record run %d stats: %w", runID, err)
		}
	}
	return nil
}

func (c *Crawler) recordRunError(ctx context.Context, runID int64, err error) {
	if e := c.db.SetRunError(context.WithoutCancel(ctx), dbsqlc.SetRunErrorParams{ID: runID, Error: err.Error()}); e != nil {
		c.log.Warn("record run error", "run", runID, "err", e)
	}
}

func (c *Crawler) inTx(ctx context.Context, f func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, c.cfg.Pool, f)
}

// enqueued follows the transaction that started run ri with n page jobs: wake this process's idle
// workers, or, when it added none, finish the run.
func (c *Crawler) enqueued(ri *runInfo, n int) {
	if n == 0 {
		c.finishCheck(context.Background(), ri.id)
	} else if c.cfg.OnEnqueue != nil {
		c.cfg.OnEnqueue(ri.queue)
	}
}

// finishCheck finishes the run if nothing of it is left; errors are left to the sweep.
func (c *Crawler) finishCheck(ctx context.Context, runID int64) {
	if _, err := c.TryFinish(context.WithoutCancel(ctx), runID); err != nil {
		c.log.Warn("finish check failed; the sweep will retry", "run", runID, "err", err)
	}
}

// outcome is what one page adds to its run's stats (n: how many page outcomes it sums).
type outcome struct {
	pages, items, errors, retries, n int
	bytes                            int64
	kind                             string
	state                            *urlstate.Page // the page's URL state, when its spider keeps one (revisit.go)
}

// workPage fetches, parses and stores one page.
func (c *Crawler) workPage(ctx context.Context, job *queue.Job) error {
	var a pageArgs
	if err := json.Unmarshal(job.Args, &a); err != nil || a.URL == "" {
		return queue.Permanent(fmt.Errorf("page job %d: bad args %s", job.ID, job.Args))
	}
	ri, err := c.runInfo(ctx, job.ParentID)
	if errors.Is(err, ErrRunNotFound) {
		return queue.Permanent(err)
	}
	if err != nil {
		return err
	}
	if ri.spider == nil {
		return queue.Permanent(fmt.Errorf("page job %d: spider %q is not an in-process spider", job.ID, ri.name))
	}
	c.pageStarted(ri.id)
	err = c.crawlPage(ctx, job, ri, a)
	if !errors.Is(err, queue.ErrCompleted) && (errors.Is(context.Cause(ctx), queue.ErrCancelRequested) || errors.Is(err, errRunCancelled)) {
		err = c.cancelPage(ctx, job, err)
	}
	if !errors.Is(err, queue.ErrCompleted) {
		c.pageEnded(ri.id) // a committed page was counted out by its batch (settle)
	}
	if errors.Is(err, errPageCancelled) {
		// The run may have just lost its last running page: it shows cancelled now, not at the
		// next sweep.
		if c.activePages(ri.id) == 0 {
			c.finishCheck(ctx, ri.id)
		}
		return queue.ErrCompleted
	}
	return err
}

var (
	// errRunCancelled: the page's run was cancelled before it was fetched.
	errRunCancelled = errors.New("run cancelled")
	// errPageCancelled: the page job was ended as cancelled (cancelPage).
	errPageCancelled = errors.New("page cancelled")
)

// cancelPage ends a page of a cancelled run as cancelled, not succeeded: it was not crawled.
func (c *Crawler) cancelPage(ctx context.Context, job *queue.Job, cause error) error {
	if cause == nil {
		cause = errRunCancelled
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.cfg.Queue.CancelHeld(wctx, job.Lease(), cause); err != nil {
		if errors.Is(err, queue.ErrLeaseLost) {
			return err
		}
		return queue.Cancel(cause) // the worker records it, retrying while the database is away
	}
	return errPageCancelled
}

// deferFault marks an error of a page's own database work (politeness, robots.txt, discovery,
// finishing, items) that is the database's fault, such as a refused connection or a restart, so
// the page runs again later without counting an attempt: only the fetch and parse of a page count
// attempts. Errors that already say what to do (fetch failures, snoozes) pass unchanged.
func deferFault(err error) error {
	if err == nil || errors.Is(err, queue.ErrCompleted) || queue.Decided(err) {
		return err
	}
	if db.IsTransient(err) {
		return queue.Defer(err)
	}
	return err
}

// crawlPage fetches, parses and stores one page of run ri.
func (c *Crawler) crawlPage(ctx context.Context, job *queue.Job, ri *runInfo, a pageArgs) error {
	if c.isCancelled(ri.id) {
		// Found before the cancel reached this process: it ends cancelled without fetching.
		return errRunCancelled
	}
	s := ri.settings
	if a.Render != "" {
		s.Render = a.Render // the rule that found the page says how to fetch it
	}
	if s.Render == spider.RenderBrowser && c.cfg.Browser == nil {
		// Not this process's page: a process that renders pages (a runner) takes it.
		c.log.Warn("a browser page reached a process that renders none; put back for a runner", "run", ri.id, "url", a.URL)
		return queue.Snooze(10 * time.Second)
	}
	host := urlx.Host(a.URL)
	if d := c.health.paused(host, time.Now()); d > 0 {
		// The host is down: wait for its pause to end without counting an attempt (hostpause.go).
		return queue.Snooze(d + time.Duration(mrand.Int64N(int64(min(d/4, time.Second))+1)))
	}
	v, err := c.session(ri, &a)
	if err != nil {
		return err
	}
	fetcher, err := c.fetcher(s, v.proxy())
	if err != nil {
		return queue.Permanent(err)
	}
	rv, err := c.revisitLoad(ctx, ri, a) // nil unless the spider keeps URL state (revisit.go)
	if err != nil {
		return deferFault(err)
	}
	if s.ObeyRobots {
		pol, wait, err := c.policy(ctx, ri, fetcher, a.URL)
		var rf *robotsFetchError
		if errors.As(err, &rf) {
			if perr, ok := c.proxyFailed(ctx, job, ri, v, rf.err); ok {
				return perr
			}
			return c.fetchFailed(ctx, job, ri, host, rf.err, nil, rf.start)
		}
		if err != nil {
			return err
		}
		if wait > 0 {
			return queue.Snooze(wait)
		}
		if u, perr := url.Parse(a.URL); perr == nil && !pol.Allowed(s.UserAgent, u.RequestURI()) {
			return c.finishPage(ctx, job, ri, outcome{kind: "robots_disallowed"}, nil)
		}
	}
	if a.Sitemap == sitemapRobots {
		return c.robotsSitemaps(ctx, job, ri, fetcher, host, a)
	}
	if rv.notDue(time.Now()) {
		return c.revisitSame(ctx, job, ri, a, rv, nil)
	}
	free, ok := c.hosts.acquire(ctx, host, s.Concurrency, hostWait)
	if !ok {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return queue.Snooze(jitter(time.Second)) // the domain is busy here: let other work run
	}
	var release func()
	if s.Delay > 0 {
		r, wait, err := c.reserve(ctx, host, s)
		if err != nil || wait > 0 {
			free()
			if err != nil {
				return err
			}
			return queue.Snooze(wait)
		}
		release = r
	}
	start := time.Now()
	res, ferr := c.revisitGet(ctx, fetcher, job, s, a.URL, v.proxy(), rv, cookies(a.Session, a.URL))
	free()
	if release != nil {
		release()
	}
	if ctx.Err() == nil && !queue.Decided(ferr) {
		if why := banned(s.Ban, res); why != "" {
			return c.bannedPage(ctx, job, ri, v, a.Session, why)
		}
	}
	if ferr != nil {
		if ctx.Err() != nil || queue.Decided(ferr) {
			return ferr // cancelled, lease lost or stopping: the worker decides; or get did
		}
		if perr, ok := c.proxyFailed(ctx, job, ri, v, ferr); ok {
			return perr
		}
		if rv.ended(ferr) {
			return c.revisitEnded(ctx, job, ri, host, rv, ferr, res, start)
		}
		return c.fetchFailed(ctx, job, ri, host, ferr, res, start)
	}
	if v != nil {
		v.rot.OK(v.px)
	}
	ri.fetched.Store(true)
	c.hostAnswered(ctx, ri.id, host, start)
	if res.Location != "" {
		return c.redirect(ctx, job, ri, a, res)
	}
	if a.Sitemap != "" {
		return c.sitemapFetched(ctx, job, ri, a, res)
	}
	if rv.unchanged(res) {
		return c.revisitSame(ctx, job, ri, a, rv, res)
	}
	result, perr := spider.ParseWithStats(ctx, ri.spider, &spider.Response{
		URL: res.URL, Status: res.Status, Header: res.Header, Body: res.Body, Depth: a.Depth,
	})
	if perr != nil {
		if errors.Is(perr, spider.ErrBadPage) {
			return c.finishPage(ctx, job, ri, outcome{pages: 1, errors: 1, bytes: res.Bytes, kind: "bad_page"}, nil)
		}
		return perr
	}
	var its []items.Item
	if len(result.Items) > 0 {
		its = make([]items.Item, len(result.Items))
		for i, it := range result.Items {
			data, err := json.Marshal(it.Fields)
			if err != nil {
				return queue.Permanent(fmt.Errorf("item %q: %w", it.Key, err))
			}
			its[i] = items.Item{RunID: ri.id, Spider: ri.name, Key: it.Key, URL: res.URL, Data: data}
			if err := its[i].Validate(); err != nil {
				return queue.Permanent(err)
			}
		}
	}
	var state *urlstate.Page
	if rv != nil {
		its, state = rv.changed(ri.id, res, result.Follow, its) // only new and changed items
	}
	if c.cfg.TxSink != nil {
		// The items commit with the page (finish.go).
		return c.finishPageItems(ctx, job, ri, outcome{pages: 1, items: len(its), bytes: res.Bytes, state: state}, follows(a, res, result.Follow), its)
	}
	if len(its) > 0 {
		wctx, cancel := context.WithTimeout(ctx, c.cfg.ItemTimeout)
		err := c.cfg.Pipeline.Write(wctx, its)
		cancel()
		if err != nil {
			if errors.Is(err, items.ErrBackpressure) || (ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded)) {
				// The sink is behind: put the page back rather than hold a worker.
				return queue.Snooze(time.Second + time.Duration(mrand.Int64N(int64(time.Second))))
			}
			return err
		}
	}
	return c.finishPage(ctx, job, ri, outcome{pages: 1, items: len(its), bytes: res.Bytes, state: state}, follows(a, res, result.Follow))
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
		// Recorded, not retried: 4xx other than 408/429, too large, forbidden, bad URL.
		if fetch.IsStatus(ferr) {
			c.hostAnswered(ctx, ri.id, host, start) // the host answers; the page is at fault
		}
		if errors.Is(ferr, fetch.ErrForbiddenAddress) {
			// The page's failure, not the host's: said here with the address and what would allow
			// it, since the run's stats keep only the kind.
			c.log.Warn("page refused: its address is not public", "run", ri.id, "url", pageURL(job), "err", ferr)
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
			c.addStat(ctx, ri.id, outcome{kind: "host_paused"})
			c.logHostPaused(ctx, ri.id, host, cause, p.until, limit)
		}
		if p.downFor < limit {
			wait := time.Until(p.until)
			if d, ok := fetch.RetryAfter(ferr); ok {
				wait = max(wait, d)
			}
			return queue.Snooze(max(wait, 0) + time.Duration(mrand.Int64N(int64(min(max(wait/4, time.Millisecond), time.Second)))))
		}
		// Down for longer than the spider allows: the page dies now rather than at the end of
		// attempts that would each wait out a pause.
		c.addStat(ctx, ri.id, outcome{errors: 1, kind: kind})
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
		o = outcome{errors: 1, kind: kind}
		c.log.Warn("page died: its retries are exhausted", "run", ri.id, "url", pageURL(job), "attempts", job.Attempt, "err", ferr)
		c.logPageDied(ctx, ri.id, pageURL(job), job.Attempt, ferr)
	}
	c.addStat(ctx, ri.id, o)
	if d, ok := fetch.RetryAfter(ferr); ok && d > 0 {
		return queue.RetryIn(ferr, d)
	}
	return queue.RetryIn(ferr, r.PageBackoff(job.Attempt))
}

// addStat records one outcome of a page that does not finish now (a retry, a host pause). A
// failure to record it is logged: the page's fate does not depend on it.
func (c *Crawler) addStat(ctx context.Context, runID int64, o outcome) {
	err := c.db.AddRunStat(context.WithoutCancel(ctx), dbsqlc.AddRunStatParams{
		RunID: runID, Pages: int32(o.pages), Items: int32(o.items), Bytes: o.bytes, Errors: int32(o.errors),
		Retries: int32(o.retries), Kind: o.kind, N: 1,
	})
	if err != nil {
		c.log.Warn("could not record a page outcome in the run's stats", "run", runID, "kind", o.kind, "err", err)
	}
}

// pageURL is the URL of a page job, for logs.
func pageURL(job *queue.Job) string {
	var a pageArgs
	_ = json.Unmarshal(job.Args, &a)
	return a.URL
}

// redirect turns a redirect into a page job for its target (same depth, one more hop), so the
// target is deduplicated by its once key and paced by politeness like any other page.
func (c *Crawler) redirect(ctx context.Context, job *queue.Job, ri *runInfo, a pageArgs, res *fetch.Result) error {
	o := outcome{bytes: res.Bytes, kind: "redirect"}
	target, err := urlx.Canonical(res.Location)
	switch {
	case err != nil:
		o.errors, o.kind = 1, "redirect_invalid"
		return c.finishPage(ctx, job, ri, o, nil)
	case a.Hops+1 > maxHops:
		o.errors, o.kind = 1, "redirects"
		return c.finishPage(ctx, job, ri, o, nil)
	case len(ri.settings.AllowedDomains) > 0 && !urlx.InDomains(urlx.Hostname(target), ri.settings.AllowedDomains):
		o.kind = "redirect_offsite"
		return c.finishPage(ctx, job, ri, o, nil)
	}
	return c.finishPage(ctx, job, ri, o, []pageArgs{{URL: target, Depth: a.Depth, Hops: a.Hops + 1, Render: a.Render, Session: a.Session.after(a.URL, res.Header), Sitemap: a.Sitemap, Since: a.Since}})
}

// fetcher returns the shared fetcher for a spider's user agent and address policy.
func (c *Crawler) fetcher(s spider.Settings, px *proxy.Proxy) (*fetch.Fetcher, error) {
	k := fetcherKey{ua: s.UserAgent, private: s.AllowPrivate, proxy: px}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.fetchers[k]; f != nil {
		return f, nil
	}
	cfg := c.cfg.Fetch
	cfg.UserAgent, cfg.AllowPrivate = s.UserAgent, s.AllowPrivate
	cfg.NoFollow = true // each hop is a page job of its own (see redirect)
	cfg.Proxy = px
	f, err := fetch.New(cfg)
	if err != nil {
		return nil, err
	}
	c.fetchers[k] = f
	return f, nil
}

// policy returns the robots.txt policy for pageURL's site in this run: from this process's cache,
// else from Postgres, else by fetching it — once per site per run, by whichever worker claims it
// (the others wait: a positive duration).
func (c *Crawler) policy(ctx context.Context, ri *runInfo, f *fetch.Fetcher, pageURL string) (*robots.Policy, time.Duration, error) {
	origin, err := robots.RobotsURL(pageURL)
	if err != nil {
		return nil, 0, nil // the fetch will report the bad URL
	}
	if p, ok := c.robots.Get(ri.id, origin); ok {
		return p, 0, nil
	}
	stored, err := c.db.GetRobots(ctx, dbsqlc.GetRobotsParams{RunID: ri.id, Origin: origin, Now: c.now()})
	switch {
	case err == nil && stored.Status.Valid:
		p := robots.FromStored(int(stored.Status.Int32), stored.Body)
		c.robots.Put(ri.id, origin, p)
		return p, 0, nil
	case err == nil && stored.Fresh:
		return nil, jitter(300 * time.Millisecond), nil // another worker is fetching it
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return nil, 0, fmt.Errorf("read robots.txt: %w", err)
	}
	if _, err := c.db.ClaimRobots(ctx, dbsqlc.ClaimRobotsParams{RunID: ri.id, Origin: origin, Now: c.now()}); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, jitter(300 * time.Millisecond), nil
		}
		return nil, 0, fmt.Errorf("claim robots.txt: %w", err)
	}
	unclaim := func() {
		// A claim left behind goes stale in 60 seconds, when another worker takes it over.
		if err := c.db.UnclaimRobots(context.WithoutCancel(ctx), dbsqlc.UnclaimRobotsParams{RunID: ri.id, Origin: origin}); err != nil {
			c.log.Warn("give up robots.txt claim; it goes stale in 60s", "origin", origin, "err", err)
		}
	}
	if ri.settings.Delay > 0 {
		release, wait, err := c.reserve(ctx, urlx.Host(pageURL), ri.settings)
		if err != nil || wait > 0 {
			unclaim()
			return nil, wait, err
		}
		defer release()
	}
	start := time.Now()
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

// reserve takes host for one request. It returns the function that frees it after the request,
// or how long to wait when a request to it is in flight or its delay has not passed.
//
// With a delay, a domain's requests are serial, each starting at least the delay after the
// previous response (Scrapy's download delay). Without one, requests are not paced through here;
// worker concurrency bounds them.
func (c *Crawler) reserve(ctx context.Context, host string, s spider.Settings) (func(), time.Duration, error) {
	busyFor := c.fetchTimeout() + 5*time.Second
	token := randToken()
	_, err := c.db.ReserveSlot(ctx, dbsqlc.ReserveSlotParams{Host: host, BusyForUs: busyFor.Microseconds(), Token: token, Now: c.now()})
	if errors.Is(err, pgx.ErrNoRows) {
		secs, err := c.db.SlotWait(ctx, dbsqlc.SlotWaitParams{Host: host, DelayUs: s.Delay.Microseconds(), Now: c.now()})
		if err != nil {
			return nil, 0, fmt.Errorf("politeness wait: %w", err)
		}
		wait := time.Duration(secs*float64(time.Second)) + time.Duration(mrand.Int64N(int64(s.Delay/4)+1))
		return nil, max(wait, 10*time.Millisecond), nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("politeness: %w", err)
	}
	release := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := c.db.ReleaseSlot(rctx, dbsqlc.ReleaseSlotParams{Host: host, DelayUs: s.Delay.Microseconds(), Token: token, Now: c.now()}); err != nil {
			c.log.Warn("release politeness slot; it frees when its busy window ends", "host", host, "err", err)
		}
	}
	return release, 0, nil
}

func (c *Crawler) fetchTimeout() time.Duration {
	if c.cfg.Fetch.ReadTimeout > 0 {
		return c.cfg.Fetch.ReadTimeout
	}
	return 30 * time.Second
}

func jitter(d time.Duration) time.Duration { return d + time.Duration(mrand.Int64N(int64(d))) }

func randToken() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.LittleEndian.Uint64(b[:]) >> 1)
}
