package crawl_test

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/testwait"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// serveDemo serves a demo site on a loopback port and returns it with its base URL.
func serveDemo(t *testing.T, cfg demosite.Config) (*demosite.Site, string) {
	t.Helper()
	site := demosite.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := site.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return site, "http://" + addr.String()
}

func startNode(t *testing.T, pool *pgxpool.Pool, cfg node.Config) (*node.Node, context.CancelFunc) {
	t.Helper()
	cfg.Fetch.AllowLoopback = true // the test sites are on loopback, which the default refuses
	return runNode(t, pool, cfg)
}

// runNode is startNode with cfg's address policy as it is.
func runNode(t *testing.T, pool *pgxpool.Pool, cfg node.Config) (*node.Node, context.CancelFunc) {
	t.Helper()
	cfg.Pool = pool
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return n, stop
}

func waitRun(t *testing.T, c *crawl.Crawler, id int64, d time.Duration) *crawl.Run {
	t.Helper()
	return testwait.ForAtMost(t, d, fmt.Sprintf("run %d finished", id), func() (*crawl.Run, bool) {
		r, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return r, r.Finished()
	})
}

// checkHits asserts every expected path was fetched exactly once and nothing else but robots.txt.
func checkHits(t *testing.T, site *demosite.Site) {
	t.Helper()
	exp := site.Expected()
	hits := site.Hits()
	want := map[string]bool{}
	for _, p := range exp.Paths {
		want[p] = true
		if hits[p] != 1 {
			t.Errorf("%s fetched %d times, want once", p, hits[p])
		}
	}
	if hits[demosite.RobotsPath] != 1 {
		t.Errorf("robots.txt fetched %d times, want once per run", hits[demosite.RobotsPath])
	}
	var extra []string
	for p := range hits {
		if !want[p] && p != demosite.RobotsPath {
			extra = append(extra, p)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("fetched paths a correct crawl never fetches: %v", extra)
	}
}

func TestDemoCrawlInProcess(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	site, base := serveDemo(t, demosite.Config{Items: 300, SlowDelay: 50 * time.Millisecond})
	var finished atomic.Int32
	n, _ := startNode(t, pool, node.Config{Workers: 2, Worker: queue.WorkerConfig{Concurrency: 8},
		OnFinish: func(int64, string) { finished.Add(1) }})
	s, err := n.Crawler.Schedule(ctxT(t, time.Minute), crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n.Crawler, s.RunID, time.Minute)
	exp := site.Expected()
	// The fetcher follows the redirect itself, so the redirect and its target are one page.
	pages := int64(exp.Pages - exp.NotFound - exp.Redirects)
	if r.State != "succeeded" || r.Stats.Items != int64(exp.Items) || r.Stats.Pages != pages {
		t.Fatalf("run %+v\nwant succeeded with %d items and %d pages", r, exp.Items, pages)
	}
	if r.Stats.ErrorsByKind["status_4xx"] != 1 || r.Stats.Errors != 1 || r.Stats.ErrorsByKind["robots_disallowed"] != int64(exp.Disallowed) {
		t.Errorf("errors %+v, want the one 404 and %d disallowed", r.Stats.ErrorsByKind, exp.Disallowed)
	}
	got, err := items.CountItems(context.Background(), pool, s.RunID)
	if err != nil || got != int64(exp.Items) {
		t.Fatalf("items in the sink: %d (%v), want %d", got, err, exp.Items)
	}
	checkHits(t, site)
	// OnFinish runs after the finishing transaction commits, which waitRun may see first.
	testwait.Until(t, "the finish reported", func() bool { return finished.Load() > 0 })
	if f := finished.Load(); f != 1 {
		t.Fatalf("run finished %d times", f)
	}
	fmt.Println("demo crawl:", r.Stats.Pages, "pages,", r.Stats.Items, "items in", r.Stats.Duration, "s")
}
