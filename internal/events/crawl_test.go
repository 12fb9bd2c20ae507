package events_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/awstest"
	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/events"
	"crawlq/internal/fetch"
	"crawlq/internal/monitor"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
)

// shopSpec is spiders/demo.yaml under another name, with monitors.
const shopSpec = `
name: shop
start_urls: ["http://127.0.0.1:8088/"]
allowed_domains: ["127.0.0.1"]
follow: [{css: a}]
items:
  - match: '/catalogue/item-\d+\.html$'
    css: div.product
    key: sku
    fields:
      sku: {css: span.sku, required: true}
      title: {css: h1.title, required: true}
      price: {css: p.price, required: true}
      category: {css: span.category}
      url: {css: a.permalink, attr: href}
concurrency: 4
monitors:
  min_items: 10
  max_error_rate: 0.2
  field_coverage: {title: 0.99, category: 0.5}
  items_vs_median: {runs: 3, within_percent: 50}
`

type crawlEnv struct {
	pool *pgxpool.Pool
	reg  *spider.Registry
	n    *node.Node
	site *demosite.Site
	base string
}

func startCrawl(t *testing.T, site demosite.Config) *crawlEnv {
	t.Helper()
	return startCrawlWith(t, site, nil)
}

// startCrawlWith is startCrawl with the node's config adjusted by adjust (nil: as is).
func startCrawlWith(t *testing.T, site demosite.Config, adjust func(*pgxpool.Pool, *node.Config)) *crawlEnv {
	t.Helper()
	e := &crawlEnv{pool: dbtest.Pool(t), reg: spider.NewRegistry(), site: demosite.New(site)}
	if err := e.reg.LoadFS(fstest.MapFS{"shop.yaml": {Data: []byte(shopSpec)}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr, err := e.site.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.base = "http://" + addr.String()
	nc := node.Config{Pool: e.pool, Spiders: e.reg, Workers: 1, Worker: queue.WorkerConfig{Concurrency: 8}, Fetch: fetch.Config{AllowLoopback: true}}
	if adjust != nil {
		adjust(e.pool, &nc)
	}
	n, err := node.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	e.n = n
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// crawl runs the shop spider to its end and returns the run.
func (e *crawlEnv) crawl(t *testing.T) *crawl.Run {
	t.Helper()
	return e.crawlSpider(t, "shop")
}

// crawlSpider runs a spider of e.reg to its end and returns the run.
func (e *crawlEnv) crawlSpider(t *testing.T, name string) *crawl.Run {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	s, err := e.n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: name, Args: map[string]string{"base_url": e.base}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, err := e.n.Crawler.Get(ctx, s.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Finished() {
			return r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %d did not finish: %+v", s.RunID, r)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Field coverage is exact: on the demo site with every third item's category removed, the report
// counts each field on exactly the items that have it.
func TestFieldCoverageExact(t *testing.T) {
	t.Parallel()
	e := startCrawl(t, demosite.Config{Items: 30, SlowDelay: time.Millisecond, Markup: demosite.MarkupNoCategory})
	r := e.crawl(t)
	p := newPublisher(t, events.Config{Pool: e.pool, Monitors: e.reg.Monitors})
	if _, err := p.Drain(ctxT(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	rep := report(t, e.pool, r.ID)
	want := e.site.ExpectedFields()
	if rep.ItemsStored == nil || *rep.ItemsStored != 30 || len(rep.Coverage) != len(want) {
		t.Fatalf("report %+v, want 30 items stored and coverage %v", rep, want)
	}
	for f, n := range want {
		if rep.Coverage[f] != int64(n) {
			t.Errorf("coverage of %s: %d, want %d", f, rep.Coverage[f], n)
		}
	}
	if want["category"] != 20 {
		t.Fatalf("the site's expectation moved: %v", want)
	}
	if rep.Monitors != monitor.StatusPassed {
		t.Fatalf("category at 2/3 passes its 50%% monitor: %+v", rep.Results)
	}
	// Every page fetched answered 2xx, and pages by status sum to the pages; the one 404 of the
	// site is an error, not a page.
	if ps := rep.Stats.PagesByStatus; len(ps) != 1 || ps["2xx"] != r.Stats.Pages || r.Stats.Pages == 0 ||
		rep.Stats.ErrorsByKind["status_4xx"] != 1 || rep.Stats.Errors != 1 {
		t.Fatalf("pages by status %v, report's stats %+v, run %+v", ps, rep.Stats, r.Stats)
	}
}

// A spider whose selectors stop matching (the site's redesign) still "succeeds", with 0 items:
// its monitors fail, the run keeps its state, and a monitors_failed event reaches the rule that
// routes failures (read back from SQS), with the failed monitors in it and a MonitorFailed metric.
func TestBrokenSpiderFailsMonitors(t *testing.T) {
	awstest.Moto(t)
	failures := newBus(t, "run-failures", `{"source":["crawlq"],"detail-type":["Run State Change"],"detail":{"outcome":["failed","monitors_failed"]}}`)
	all := newBus(t, "all-runs", `{"source":["crawlq"]}`)
	e := startCrawl(t, demosite.Config{Items: 30, SlowDelay: time.Millisecond})
	cfg := awstest.Config(t)
	var emf bytes.Buffer
	p := newPublisher(t, events.Config{Pool: e.pool, Putter: eventbridge.NewFromConfig(cfg), Monitors: e.reg.Monitors, Metrics: &emf})

	var good []int64
	for range 2 {
		r := e.crawl(t)
		if _, err := p.Drain(ctxT(t, 30*time.Second)); err != nil {
			t.Fatal(err)
		}
		if rep := report(t, e.pool, r.ID); rep.Monitors != monitor.StatusPassed || rep.Stats.Items != 30 {
			t.Fatalf("good run: %+v", rep)
		}
		good = append(good, r.ID)
	}
	if err := e.site.SetMarkup(demosite.MarkupRedesign); err != nil {
		t.Fatal(err)
	}
	broken := e.crawl(t)
	if broken.State != "succeeded" || broken.Stats.Items != 0 {
		t.Fatalf("the broken spider's run: %+v, want succeeded with 0 items", broken)
	}
	if _, err := p.Drain(ctxT(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	after, err := e.n.Crawler.Get(context.Background(), broken.ID)
	if err != nil || after.State != "succeeded" {
		t.Fatalf("judging changed the run: %+v %v", after, err)
	}

	got := failures.drain()
	if len(got) != 1 || got[0].Detail.RunID != broken.ID || got[0].Detail.Outcome != "monitors_failed" || got[0].Detail.State != "succeeded" {
		t.Fatalf("failure rule got %+v, want the one monitors_failed event of run %d", got, broken.ID)
	}
	failed := map[string]bool{}
	for _, r := range got[0].Detail.Monitors.Results {
		if r.Status == monitor.StatusFailed {
			failed[r.Monitor+" "+r.Field] = true
		}
	}
	for _, m := range []string{"min_items ", "field_coverage title", "field_coverage category", "items_vs_median "} {
		if !failed[m] {
			t.Errorf("monitor %q did not fail: %+v", m, got[0].Detail.Monitors.Results)
		}
	}
	if failed["max_error_rate "] {
		t.Errorf("the error rate did not change, yet its monitor failed")
	}
	// Every state change of the three runs arrived once, in order.
	evs := all.drain()
	for _, id := range append(good, broken.ID) {
		if s := strings.Join(states(evs, id), ","); s != "pending,running,succeeded" {
			t.Errorf("run %d events %s", id, s)
		}
	}
	if len(evs) != 9 {
		t.Errorf("%d events, want 9", len(evs))
	}
	if !strings.Contains(emf.String(), `"Monitor":"min_items","MonitorFailed":1`) {
		t.Errorf("no MonitorFailed metric for min_items:\n%s", emf.String())
	}
}

// A node with an events loop whose tick is an hour away publishes a real run's events as the
// run starts and finishes: no tick is needed.
func TestNodePublishesRunEventsAtOnce(t *testing.T) {
	awstest.Moto(t)
	b := newBus(t, "all-runs", `{"source":["crawlq"]}`)
	e := startCrawlWith(t, demosite.Config{Items: 20, SlowDelay: time.Millisecond}, func(pool *pgxpool.Pool, c *node.Config) {
		c.Events = newLoop(t, events.LoopConfig{Interval: time.Hour,
			Publisher: newPublisher(t, events.Config{Pool: pool, Putter: motoEventBridge(t), Monitors: c.Spiders.Monitors})})
	})
	r := e.crawl(t)
	got := b.collect(t, r.ID, "pending,running,succeeded")
	final := got[len(got)-1].Detail
	if final.Outcome != "succeeded" || final.Stats.Items != 20 || final.Monitors == nil {
		t.Fatalf("final event %+v", final)
	}
}

// A spider that recrawls only what changed (revisit: changed_only) emits nothing on a run of the
// unchanged site: its monitors judge the items the run saw (new, changed and unchanged), so an
// unchanged recrawl passes min_items and the drift monitor, and field coverage, with no item
// emitted to count fields in, is unknown rather than failed. A run whose pages lost their items
// still fails.
func TestUnchangedRecrawlPassesMonitors(t *testing.T) {
	t.Parallel()
	e := startCrawl(t, demosite.Config{Items: 30, SlowDelay: time.Millisecond})
	spec := strings.Replace(shopSpec, "name: shop\n", "name: shop_changed\n", 1) + "revisit: changed_only\n"
	if err := e.reg.LoadFS(fstest.MapFS{"shop_changed.yaml": {Data: []byte(spec)}}); err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, events.Config{Pool: e.pool, Monitors: e.reg.Monitors})
	judged := func(r *crawl.Run) *events.Report {
		t.Helper()
		if _, err := p.Drain(ctxT(t, 30*time.Second)); err != nil {
			t.Fatal(err)
		}
		return report(t, e.pool, r.ID)
	}
	if rep := judged(e.crawlSpider(t, "shop_changed")); rep.Monitors != monitor.StatusPassed || rep.Stats.Items != 30 {
		t.Fatalf("first run: %+v", rep)
	}
	again := e.crawlSpider(t, "shop_changed")
	rep := judged(again)
	if again.Stats.Items != 0 || rep.Stats.Changes == nil || rep.Stats.Changes.Unchanged != 30 {
		t.Fatalf("the recrawl emitted %d items, changes %+v; want 0 and 30 unchanged", again.Stats.Items, rep.Stats.Changes)
	}
	if rep.Monitors != monitor.StatusPassed {
		t.Fatalf("the unchanged recrawl failed its monitors: %+v", rep.Results)
	}
	got := map[string]string{}
	for _, r := range rep.Results {
		got[r.Monitor+" "+r.Field] = r.Status + ": " + r.Message
	}
	for m, want := range map[string]string{"min_items ": "passed: 30 items seen", "items_vs_median ": "passed: 30 items seen",
		"field_coverage title": "unknown: "} {
		if !strings.HasPrefix(got[m], want) {
			t.Errorf("%s: %q, want it to start %q", m, got[m], want)
		}
	}
	if err := e.site.SetMarkup(demosite.MarkupRedesign); err != nil {
		t.Fatal(err)
	}
	if rep := judged(e.crawlSpider(t, "shop_changed")); rep.Monitors != monitor.StatusFailed {
		t.Fatalf("the redesigned site's run passed its monitors: %+v", rep.Results)
	}
}
