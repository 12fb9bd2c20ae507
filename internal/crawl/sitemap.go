package crawl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/fetch"
	"crawlq/internal/queue"
	"crawlq/internal/robots"
	"crawlq/internal/sitemap"
	"crawlq/internal/spider"
	"crawlq/internal/urlx"
)

// Sitemaps: a spider's spec may start its runs from sitemaps besides its start URLs (spider
// SitemapSpec). Each sitemap file is a page job of the run (pageArgs.Sitemap), fetched and paced
// like any page, and so is the robots.txt of each start URL's site when its Sitemap: lines are
// wanted. A sitemap index adds its children; a urlset adds its URLs as pages at depth 0, those on
// the spider's domains, and with since: last_run only those whose lastmod is later than the start
// of the spider's last succeeded run (pageArgs.Since).

// Kinds of pageArgs.Sitemap.
const (
	sitemapFile   = "sitemap" // a sitemap or sitemap index
	sitemapRobots = "robots"  // a robots.txt read for its Sitemap: lines
)

// sitemapStarts returns the sitemap jobs that start run ri besides its start requests.
func (c *Crawler) sitemapStarts(ctx context.Context, ri *runInfo, reqs []spider.Request) ([]pageArgs, error) {
	s := ri.settings
	if len(s.Sitemaps) == 0 && !s.SitemapsFromRobots {
		return nil, nil
	}
	var since int64
	if s.SitemapSince == spider.SinceLastRun {
		t, err := c.db.LastGoodRunStart(ctx, dbsqlc.LastGoodRunStartParams{Spider: ri.name, BeforeID: ri.id})
		if err != nil {
			return nil, fmt.Errorf("sitemaps since the last run: %w", err)
		}
		if t.After(time.Unix(0, 0)) {
			since = t.UnixNano()
		}
	}
	var out []pageArgs
	for _, u := range s.Sitemaps {
		out = append(out, pageArgs{URL: u, Sitemap: sitemapFile, Since: since})
	}
	if s.SitemapsFromRobots {
		for _, r := range reqs {
			if u, err := robots.RobotsURL(r.URL); err == nil {
				out = append(out, pageArgs{URL: u, Sitemap: sitemapRobots, Since: since})
			}
		}
	}
	return out, nil
}

// robotsSitemaps finishes a robots.txt job: the run's copy of the site's robots.txt (fetched
// once per run, as for any page) names the sitemaps that become jobs.
func (c *Crawler) robotsSitemaps(ctx context.Context, job *queue.Job, ri *runInfo, f *fetch.Fetcher, v *via, host string, a pageArgs) error {
	pol, wait, err := c.policy(ctx, ri, f, v, a.URL)
	var rf *robotsFetchError
	if errors.As(err, &rf) {
		return c.fetchFailed(ctx, job, ri, host, rf.err, nil, rf.start)
	}
	if err != nil {
		return err
	}
	if wait > 0 {
		return queue.Snooze(wait)
	}
	var follow []pageArgs
	for _, raw := range pol.Sitemaps() {
		if u, err := urlx.Canonical(raw); err == nil {
			follow = append(follow, pageArgs{URL: u, Sitemap: sitemapFile, Since: a.Since})
		}
	}
	return c.finishPage(ctx, job, ri, outcome{kind: "sitemap_robots"}, follow)
}

// sitemapFetched finishes a fetched sitemap file: its children, or its URLs, become jobs.
func (c *Crawler) sitemapFetched(ctx context.Context, job *queue.Job, ri *runInfo, a pageArgs, res *fetch.Result) error {
	sm, err := sitemap.Parse(res.Body)
	if err != nil {
		c.log.Warn("sitemap unreadable", "run", ri.id, "url", a.URL, "err", err)
		return c.finishPage(ctx, job, ri, outcome{pages: 1, errors: 1, bytes: res.Bytes, kind: "sitemap_invalid"}, nil)
	}
	since := time.Unix(0, a.Since)
	var follow []pageArgs
	add := func(e sitemap.Entry, kind string) {
		if a.Since > 0 && !e.Newer(since) {
			return
		}
		u, err := urlx.Canonical(e.Loc)
		if err != nil {
			return
		}
		if d := ri.settings.AllowedDomains; kind == "" && len(d) > 0 && !urlx.InDomains(urlx.Hostname(u), d) {
			return
		}
		follow = append(follow, pageArgs{URL: u, Sitemap: kind, Since: a.Since})
	}
	for _, e := range sm.Children {
		add(e, sitemapFile)
	}
	for _, e := range sm.URLs {
		add(e, "")
	}
	for i := range follow {
		if follow[i].Sitemap == "" {
			follow[i].Since = 0 // a page of the site, not a sitemap
		}
	}
	return c.finishPage(ctx, job, ri, outcome{pages: 1, bytes: res.Bytes, kind: "sitemap"}, follow)
}
