package crawl_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/testwait"
)

// A run's errors are its pages that ended failed, and a page that died is one while it is dead:
// counted so while the run is live and when it finishes. A redrive that queues it again counts its
// last attempt as a retry instead, so the page dying again is one error, not two, and the page
// then succeeding is none; its attempts stay counted by kind.
func TestRedrivenPageIsAnErrorOnlyWhileDead(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	site := demosite.New(demosite.Config{Items: 24, PerPage: 12, SlowDelay: time.Millisecond})
	const broken, held = "/catalogue/item-3.html", "/catalogue/item-5.html"
	var fixed atomic.Bool
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case broken:
			if !fixed.Load() {
				http.Error(w, "broken", http.StatusServiceUnavailable)
				return
			}
		case held: // keeps the first run live until the broken page is dead
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		site.ServeHTTP(w, r)
	})
	sw := serveSwitchable(t, h)
	spec := demoWithRetry("  attempts: 3\n  backoff: 10ms\n  max_backoff: 20ms\n  max_dead_share: 1\n")
	n, _ := startNode(t, pool, node.Config{Spiders: registry(t, spec), Workers: 1, Worker: queue.WorkerConfig{Concurrency: 8}})
	ctx := context.Background()
	s, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": sw.base()}})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the broken page dead", func() bool { return pageStates(t, n, s.RunID)["dead"] == 1 })
	live, err := n.Crawler.Get(ctx, s.RunID)
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	// The demo site's other errors are its deliberate 404s, recorded as they end (never retried).
	if other := live.Stats.ErrorsByKind["status_4xx"]; live.Finished() || live.Stats.Errors != other+1 || live.DeadPages != 1 {
		t.Errorf("live run %s: %d errors (%d 4xx), %d dead pages; want running with the dead page counted in both", live.State, live.Stats.Errors, other, live.DeadPages)
	}
	first := waitRun(t, n.Crawler, s.RunID, 30*time.Second)
	other := first.Stats.ErrorsByKind["status_4xx"]
	if first.State != crawl.StateIncomplete || first.Stats.Errors != other+1 || first.DeadPages != 1 {
		t.Fatalf("run %s, %d errors (%d 4xx), %d dead pages; want incomplete with the broken page one error", first.State, first.Stats.Errors, other, first.DeadPages)
	}

	// Redriven while still broken: it dies again, and is still one error.
	if k, err := n.Crawler.Redrive(ctx, s.RunID); err != nil || k != 1 {
		t.Fatalf("redrive: %d pages, %v; want the dead page", k, err)
	}
	again := waitRun(t, n.Crawler, s.RunID, 30*time.Second)
	if again.State != crawl.StateIncomplete || again.Stats.Errors != other+1 || again.DeadPages != 1 || again.Stats.Retries <= first.Stats.Retries {
		t.Errorf("after a redrive that died again: run %s, %d errors, %d dead pages, retries %d (before %d); want incomplete, %d, 1 and more retries",
			again.State, again.Stats.Errors, again.DeadPages, again.Stats.Retries, first.Stats.Retries, other+1)
	}

	// Redriven once fixed: it succeeds, and is no error; its failed attempts are retries.
	fixed.Store(true)
	if k, err := n.Crawler.Redrive(ctx, s.RunID); err != nil || k != 1 {
		t.Fatalf("redrive: %d pages, %v; want the dead page", k, err)
	}
	last := waitRun(t, n.Crawler, s.RunID, 30*time.Second)
	if last.State != crawl.StateSucceeded || last.Stats.Errors != other || last.DeadPages != 0 || len(last.FailedPages) != 0 {
		t.Errorf("after a redrive that succeeded: run %s, %d errors, %d dead pages, failed pages %v; want succeeded with the 4xx (%d) its only errors and no dead page",
			last.State, last.Stats.Errors, last.DeadPages, last.FailedPages, other)
	}
	if last.Stats.Retries != again.Stats.Retries+1 || last.Stats.Pages != first.Stats.Pages+1 ||
		last.Stats.ErrorsByKind["status_5xx"] != again.Stats.ErrorsByKind["status_5xx"] {
		t.Errorf("after a redrive that succeeded: retries %d, pages %d, status_5xx attempts %d; want %d, %d and %d (its last failed attempt retried, one page more, no attempt uncounted)",
			last.Stats.Retries, last.Stats.Pages, last.Stats.ErrorsByKind["status_5xx"], again.Stats.Retries+1, first.Stats.Pages+1, again.Stats.ErrorsByKind["status_5xx"])
	}
}
