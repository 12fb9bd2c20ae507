package crawl_test

import (
	"context"
	"testing"
	"time"

	"crawlq/internal/clock"
	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/testwait"
)

// TestHostPauseEndsWhenTheClockPassesIt: a host that refuses connections is paused for an hour
// of the crawl's clock (Config.Clock, through node.Config.Clock, shared with the queue), and its
// pause ends because that stopped clock is moved past it, not because the test waits an hour:
// the run then fetches every page it had put back and succeeds, with no attempt counted.
func TestHostPauseEndsWhenTheClockPassesIt(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	site := demosite.New(demosite.Config{Items: 12, PerPage: 12})
	sw := serveSwitchable(t, site)
	sw.down() // connections refused: the host fails at the first fetch
	clk := clock.NewStopped(time.Now())
	n, _ := startNode(t, pool, node.Config{Clock: clk, MaintainEvery: -1, Workers: 1, Worker: queue.WorkerConfig{Concurrency: 4},
		Spiders: registry(t, demoWithRetry("  host_pause: 1h\n  max_host_pause: 1h\n  host_down_limit: 24h\n  start_down_limit: 24h\n"))})
	ctx := context.Background()
	s, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": sw.base()}})
	if err != nil {
		t.Fatal(err)
	}
	pause := testwait.For(t, "the host paused", func() (crawl.HostDown, bool) {
		p, ok, err := n.Crawler.HostPause(ctx, s.RunID, sw.base()+"/")
		if err != nil {
			t.Fatal(err)
		}
		return p, ok
	})
	if left := pause.PausedUntil.Sub(clk.Now()); left < 59*time.Minute {
		t.Fatalf("the host is paused for %s of the clock; want an hour", left)
	}
	// The start page is put back until the pause ends: moved before that, the clock would put it
	// back past the move.
	testwait.Until(t, "the start page put back for the pause", func() bool {
		var waiting bool
		err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM crawlq_job WHERE state = 'scheduled' AND run_at > $1)", clk.Now().Add(59*time.Minute)).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	sw.up()
	// The pause and the spread a put-back page adds to it (at most a second) are over.
	clk.Advance(time.Hour + 2*time.Second)
	r := waitRun(t, n.Crawler, s.RunID, time.Minute)
	stored, err := items.CountItems(ctx, pool, s.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != crawl.StateSucceeded || stored != int64(site.Expected().Items) {
		t.Fatalf("run %s with %d items; want succeeded with %d", r.State, stored, site.Expected().Items)
	}
	if m := maxPageAttempt(t, n, s.RunID); m > 1 {
		t.Errorf("a page reached attempt %d: the pause cost pages attempts", m)
	}
}
