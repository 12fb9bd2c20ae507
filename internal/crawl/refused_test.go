package crawl_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/runlog"
)

// TestRefusedStartURLFailsTheRunSayingWhy: a worker without --allow-loopback refuses a start URL
// on 127.0.0.1. The run fails, and says why where the operator looks, not only in the worker's
// own output: its failed_pages list the page with the address and what to set, its error points
// at them, and its log (crawlq logs) has the page's death with the same words. The fix it names
// works: redriven on a worker that allows loopback, the run succeeds.
func TestRefusedStartURLFailsTheRunSayingWhy(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	site, base := serveDemo(t, demosite.Config{Items: 12, PerPage: 12})
	logs := runlog.Postgres{Pool: pool}
	strict, stop := runNode(t, pool, node.Config{Workers: 1, Worker: queue.WorkerConfig{Concurrency: 2}, RunLog: logs})
	ctx := context.Background()
	s, err := strict.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, strict.Crawler, s.RunID, time.Minute)
	stop()
	const why = "127.0.0.1 is a loopback address; set allow_private: true in the spider to crawl it (or, for a site on this machine, --allow-loopback"
	if r.State != crawl.StateFailed || len(r.FailedPages) != 1 || !strings.HasPrefix(r.FailedPages[0].URL, base) ||
		!strings.Contains(r.FailedPages[0].Error, why) {
		t.Fatalf("run %s, failed pages %+v; want failed, its start page listed with %q", r.State, r.FailedPages, why)
	}
	if !strings.Contains(r.Error, "see failed_pages") || !strings.Contains(r.Error, "redrive --run") {
		t.Errorf("run error %q; want it to point at failed_pages and the redrive", r.Error)
	}
	if r.Stats.ErrorsByKind["forbidden"] != 1 || r.Stats.Errors != 1 || r.Stats.HostPauses != 0 {
		t.Errorf("stats %+v; want 1 error, of kind forbidden, and no host pause", r.Stats)
	}
	lines, err := runlog.ReadAll(ctx, logs, s.RunID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	said := false
	for _, l := range lines {
		text = append(text, l.Text)
		said = said || strings.Contains(l.Text, "page died after 1 attempt: "+base) && strings.Contains(l.Text, why)
	}
	if !said {
		t.Errorf("the run log does not say the start page died with %q:\n%s", why, strings.Join(text, "\n"))
	}
	if h := len(site.Hits()); h != 0 {
		t.Errorf("the site got %d requests from a worker that refuses loopback", h)
	}

	allowing, _ := startNode(t, pool, node.Config{Workers: 1, Worker: queue.WorkerConfig{Concurrency: 2}, RunLog: logs})
	if k, err := allowing.Crawler.Redrive(ctx, s.RunID); err != nil || k != 1 {
		t.Fatalf("redrive: %d pages, %v; want the start page", k, err)
	}
	if r := waitRun(t, allowing.Crawler, s.RunID, time.Minute); r.State != crawl.StateSucceeded || r.Stats.Items != int64(site.Expected().Items) {
		t.Fatalf("after the redrive on a worker allowing loopback: run %s with %d items; want succeeded with %d", r.State, r.Stats.Items, site.Expected().Items)
	}
}
