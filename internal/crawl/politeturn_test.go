package crawl_test

import (
	"context"
	"testing"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/node"
	"crawlq/internal/queue"
)

// A page of a spider with a delay waits for its host's turn in its worker, not by being put back
// (snoozed) to be claimed again later, which made the delay cost about twice what it says: one
// process crawls the site with no page put back, its requests still the delay apart.
func TestPagesWaitTheirHostsTurnInTheirWorker(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	site := demosite.New(demosite.Config{Items: 16, PerPage: 8, SlowDelay: time.Millisecond})
	base, arrivals := serveArrivals(t, site)
	n, _ := startNode(t, pool, node.Config{Spiders: registry(t, demoWithRetry("  attempts: 2\n")), Workers: 1, Worker: queue.WorkerConfig{Concurrency: 4}})
	delay := crawl.Duration(50 * time.Millisecond)
	s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "demo",
		Args: map[string]string{"base_url": base}, Settings: crawl.Overrides{Delay: &delay}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n.Crawler, s.RunID, 2*time.Minute)
	if r.State != crawl.StateSucceeded || r.Stats.Items != int64(site.Expected().Items) {
		t.Fatalf("run %s with %d items; want succeeded with %d", r.State, r.Stats.Items, site.Expected().Items)
	}
	if st := n.Stats(); st.Snoozed != 0 {
		t.Errorf("%d pages were put back to wait for their host's turn; want none (claimed %d)", st.Snoozed, st.Claimed)
	}
	checkGaps(t, arrivals(), time.Duration(delay))
}
