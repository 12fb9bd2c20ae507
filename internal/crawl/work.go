package crawl

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/db"
	"crawlq/internal/dbsqlc"
	"crawlq/internal/fetch"
	"crawlq/internal/proxy"
	"crawlq/internal/queue"
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
// hostPauses is set only for a host pause, which finishes no page: addStat records it (a
// batch of finished pages, commitBatch, carries none).
type outcome struct {
	pages, items, errors, retries, hostPauses, n int
	bytes                                        int64
	kind                                         string
	lost                                         itemLoss         // the page's items not stored for their key or a required field (itemloss.go)
	state                                        *urlstate.Page   // the page's URL state, when its spider keeps one (revisit.go)
	walked                                       []*urlstate.Page // the pages it walked (walk.go), recorded with it
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

// pageJob is a page job at work: its args, its run, and what crawlPage settled for it before its
// fetch.
type pageJob struct {
	job *queue.Job
	ri  *runInfo
	a   pageArgs        // its session as the session step left it (sessions.go)
	s   spider.Settings // its run's settings, the page's render applied (render.go)
	// host is the page's host, for politeness and host health (hosts.go, hostpause.go).
	host    string
	v       *via // the proxy it goes through; nil: direct (proxies.go)
	fetcher *fetch.Fetcher
	rv      *revisit // its URL state; nil unless its spider keeps one (revisit.go)
}

// crawlPage fetches, parses and stores one page of run ri. Each step either lets the page go on
// (nil) or decides its fate (its error: a snooze, a retry, a finish).
func (c *Crawler) crawlPage(ctx context.Context, job *queue.Job, ri *runInfo, a pageArgs) error {
	if c.isCancelled(ri.id) {
		// Found before the cancel reached this process: it ends cancelled without fetching.
		return errRunCancelled
	}
	p, err := c.preparePage(ctx, job, ri, a)
	if err != nil {
		return err
	}
	if err := c.obeyRobots(ctx, p); err != nil {
		return err
	}
	if p.a.Sitemap == sitemapRobots {
		return c.robotsSitemaps(ctx, job, ri, p.fetcher, p.v, p.host, p.a)
	}
	if p.rv.reached(ri.id) {
		return c.finishPage(ctx, job, ri, outcome{kind: "walked_already"}, nil)
	}
	if p.rv.notDue(c.clk.Now()) {
		return c.revisitSame(ctx, job, ri, p.a, p.rv, nil)
	}
	res, err := c.fetchPage(ctx, p)
	if err != nil {
		return err
	}
	switch {
	case res.Location != "":
		return c.redirect(ctx, job, ri, p.a, res)
	case p.a.Sitemap != "":
		return c.sitemapFetched(ctx, job, ri, p.a, res)
	case p.rv.unchanged(res):
		return c.revisitSame(ctx, job, ri, p.a, p.rv, res)
	}
	return c.parsePage(ctx, p, res)
}

// preparePage settles how page a is fetched: its settings, whether this process can fetch it,
// whether its host is paused, its session and proxy, its fetcher and its URL state.
func (c *Crawler) preparePage(ctx context.Context, job *queue.Job, ri *runInfo, a pageArgs) (*pageJob, error) {
	s, err := c.pageSettings(ri, a)
	if err != nil {
		return nil, err
	}
	host := urlx.Host(a.URL)
	if err := c.pagePaused(ctx, host, job); err != nil {
		return nil, err
	}
	v, err := c.session(ctx, ri, &a)
	if err != nil {
		return nil, err
	}
	fetcher, err := c.fetcher(s, v.proxy())
	if err != nil {
		return nil, queue.Permanent(err)
	}
	rv, err := c.revisitLoad(ctx, ri, a)
	if err != nil {
		return nil, deferFault(err)
	}
	return &pageJob{job: job, ri: ri, a: a, s: s, host: host, v: v, fetcher: fetcher, rv: rv}, nil
}

// fetchPage requests the page while it holds its host (hosts.go) and its proxy (proxies.go). It returns the page's answer,
// or an error that decides the page's fate: a ban, a failed fetch, its host busy.
func (c *Crawler) fetchPage(ctx context.Context, p *pageJob) (*fetch.Result, error) {
	releaseHost, err := c.takeHost(ctx, p.host, p.s)
	if err != nil {
		return nil, err
	}
	releaseProxy, err := c.takeProxy(ctx, p.v, p.s)
	if err != nil {
		releaseHost()
		return nil, err
	}
	release := func() { releaseProxy(); releaseHost() }
	start := c.clk.Now()
	res, ferr := c.revisitGet(ctx, p.fetcher, p.job, p.ri.id, p.s, p.a.URL, p.v.proxy(), p.rv, p.a.Session)
	release()
	if ctx.Err() == nil && !queue.Decided(ferr) {
		if why := banned(p.s.Ban, p.a.URL, res); why != "" {
			return nil, c.bannedPage(ctx, p.job, p.ri, p.v, p.a.Session, why)
		}
	}
	if ferr != nil {
		return nil, c.pageFetchFailed(ctx, p, ferr, res, start)
	}
	c.proxyAnswered(ctx, p.v)
	p.ri.fetched.Store(true)
	c.hostAnswered(ctx, p.ri.id, p.host, start)
	return res, nil
}

// parsePage parses a fetched page with its spider and stores what it yielded: its items (only
// the new and changed ones for a spider that keeps URL state) and its follow-ups.
func (c *Crawler) parsePage(ctx context.Context, p *pageJob, res *fetch.Result) error {
	result, err := spider.ParseWithStats(ctx, p.ri.spider, &spider.Response{
		URL: res.URL, Status: res.Status, Header: res.Header, Body: res.Body, Depth: p.a.Depth,
	})
	if err != nil {
		if errors.Is(err, spider.ErrBadPage) {
			return c.finishPage(ctx, p.job, p.ri, outcome{pages: 1, errors: 1, bytes: res.Bytes, kind: "bad_page"}, nil)
		}
		return err
	}
	its, err := pageItems(p.ri, res.URL, result.Items)
	if err != nil {
		return err
	}
	o := outcome{pages: 1, bytes: res.Bytes, lost: c.itemsLost(ctx, p.ri.id, res.URL, result)}
	if p.rv != nil {
		its, o.state = p.rv.changed(p.ri.id, res, result.Follow, its)
	}
	o.items = len(its)
	return c.storePage(ctx, p, o, follows(p.a, res, result.Follow), its)
}

// addStat records one outcome of a page that does not finish now (a retry, a host pause). A
// failure to record it is logged: the page's fate does not depend on it.
func (c *Crawler) addStat(ctx context.Context, runID int64, o outcome) {
	err := c.db.AddRunStat(context.WithoutCancel(ctx), dbsqlc.AddRunStatParams{
		RunID: runID, Pages: int32(o.pages), Items: int32(o.items), Bytes: o.bytes, Errors: int32(o.errors),
		Retries: int32(o.retries), HostPauses: int32(o.hostPauses), Kind: o.kind, N: 1,
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

func jitter(d time.Duration) time.Duration { return d + time.Duration(mrand.Int64N(int64(d))) }

func randToken() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.LittleEndian.Uint64(b[:]) >> 1)
}
