package crawl_test

import (
	"strings"
	"testing"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/node"
	"crawlq/internal/queue"
)

// sitemapSpec is the demo spider without follow rules, started from the sitemaps its site's
// robots.txt names: every item it reaches comes through a sitemap.
const sitemapSpec = `
name: demo
start_urls: [http://127.0.0.1:8088/]
allowed_domains: [127.0.0.1]
sitemaps: {from_robots: true, since: last_run}
items:
  - match: '/catalogue/item-\d+\.html$'
    css: div.product
    key: sku
    fields:
      sku: {css: span.sku, required: true}
      price: {css: p.price, required: true}
concurrency: 8
`

// itemHits lists the item pages fetched since the last reset.
func itemHits(site *demosite.Site) map[string]int64 {
	out := map[string]int64{}
	for p, n := range site.Hits() {
		if strings.HasPrefix(p, "/catalogue/item-") {
			out[p] = n
		}
	}
	return out
}

// A spider started from a sitemap index with gzipped children (named by robots.txt) reaches
// every URL it lists; with since: last_run its next run, after the site changed 5% of its items,
// fetches only those.
func TestSitemapsStartRunsAndSinceLastRunFetchesOnlyNewer(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	site, base := serveDemo(t, demosite.Config{Items: 500, SitemapSize: 200, SlowDelay: time.Millisecond, ChangePercent: 5, Seed: 9})
	n, _ := startNode(t, pool, node.Config{Spiders: registry(t, sitemapSpec), Workers: 2, Worker: queue.WorkerConfig{Concurrency: 8}})

	run := func() *crawl.Run {
		s, err := n.Crawler.Schedule(ctxT(t, time.Minute), crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": base}})
		if err != nil {
			t.Fatal(err)
		}
		r := waitRun(t, n.Crawler, s.RunID, 2*time.Minute)
		if r.State != crawl.StateSucceeded {
			t.Fatalf("run %d: %s %+v", r.ID, r.State, r.FailedPages)
		}
		return r
	}
	first := run()
	hits := itemHits(site)
	if first.Stats.Items != 500 || len(hits) != 500 {
		t.Fatalf("first run: %d items, %d item pages fetched; want all 500 through the sitemaps", first.Stats.Items, len(hits))
	}
	for p, h := range hits {
		if h != 1 {
			t.Errorf("%s fetched %d times", p, h)
		}
	}
	if got := first.Stats.ErrorsByKind["sitemap"]; got != 5 {
		t.Errorf("first run read %d sitemap files, want 5 (the index, pages.xml.gz and 3 of items)", got)
	}

	site.ResetHits()
	ch := site.Advance()
	second := run()
	hits = itemHits(site)
	want := map[string]bool{}
	for _, sku := range ch.Changed {
		want["/catalogue/item-"+strings.TrimLeft(strings.TrimPrefix(sku, "CQ-"), "0")+".html"] = true
	}
	if len(hits) != len(want) || second.Stats.Items != int64(len(want)) {
		t.Errorf("second run fetched %d item pages and yielded %d items; want exactly the %d changed", len(hits), second.Stats.Items, len(want))
	}
	for p := range hits {
		if !want[p] {
			t.Errorf("second run fetched %s, which did not change", p)
		}
	}
}
