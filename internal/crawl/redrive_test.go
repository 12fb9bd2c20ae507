package crawl_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"crawlq/internal/clock"
	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/runlog"
	"crawlq/internal/testwait"
)

// TestRedriveClearsTheHostPause: a redrive is the operator saying "try again now". A start URL
// whose host refuses connections fails its run once the host has been down past its limit, and
// the host is left paused for another hour of the crawl's stopped clock. A redrive, made by
// another process than the worker (as `crawlq redrive --run` is), clears that pause: the page is
// fetched at once, though the worker had learnt of the hour's pause itself, and a host still
// down starts a new streak with its whole down limit; once the site is back, a second redrive
// finishes the run with every item. The clock never passes the pauses the redrives cleared, so
// a page that waited one out would never be fetched. The run log says each pause cleared.
func TestRedriveClearsTheHostPause(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	site := demosite.New(demosite.Config{Items: 12, PerPage: 12})
	sw := serveSwitchable(t, site)
	sw.down() // connections refused from the first fetch
	clk := clock.NewStopped(time.Now())
	reg := registry(t, demoWithRetry("  host_pause: 1h\n  max_host_pause: 1h\n  host_down_limit: 1m\n  start_down_limit: 1m\n"))
	logs := runlog.Postgres{Pool: pool}
	// The worker's maintenance (every second of real time) sweeps the run once its page died.
	worker, _ := startNode(t, pool, node.Config{Clock: clk, Workers: 1, Worker: queue.WorkerConfig{Concurrency: 2},
		Spiders: reg, RunLog: logs})
	// The process that redrives works no page: what it clears must reach the worker through the
	// database.
	cli, err := node.New(node.Config{Pool: pool, Clock: clk, MaintainEvery: -1, Spiders: reg, RunLog: logs})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := worker.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": sw.base()}})
	if err != nil {
		t.Fatal(err)
	}
	start := sw.base() + "/"
	pauseOf := func() (crawl.HostDown, bool) {
		p, ok, err := worker.Crawler.HostPause(ctx, s.RunID, start)
		if err != nil {
			t.Fatal(err)
		}
		return p, ok
	}
	// failPastTheLimit waits for the start page to be put back for the host's hour, then moves the
	// clock past it: the page's probe fails an hour after the host went down, past its minute, and
	// the run fails with the host paused for another hour.
	failPastTheLimit := func() {
		t.Helper()
		testwait.For(t, "the host paused", pauseOf)
		testwait.Until(t, "the start page put back for the pause", func() bool {
			var waiting bool
			err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM crawlq_job WHERE parent_id = $1 AND state = 'scheduled' AND run_at > $2)",
				s.RunID, clk.Now().Add(59*time.Minute)).Scan(&waiting)
			if err != nil {
				t.Fatal(err)
			}
			return waiting
		})
		clk.Advance(time.Hour + 2*time.Second) // the pause and the spread a put-back page adds (at most a second)
		r := waitRun(t, worker.Crawler, s.RunID, time.Minute)
		if r.State != crawl.StateFailed || r.DeadPages != 1 {
			t.Fatalf("run %s with %d dead pages; want failed with its start page dead", r.State, r.DeadPages)
		}
		if p, ok := pauseOf(); !ok || p.PausedUntil.Sub(clk.Now()) < 59*time.Minute {
			t.Fatalf("host pause %+v (%v) after the run failed; want another hour of it", p, ok)
		}
	}
	failPastTheLimit()

	// Redriven while the host is still down: the page probes it now, which starts a new streak,
	// down since now and given its whole minute again.
	redriveAt := clk.Now().Round(0) // the database keeps microseconds: compared within one
	near := func(a, b time.Time) bool { return a.Sub(b).Abs() < time.Millisecond }
	if k, err := cli.Crawler.Redrive(ctx, s.RunID); err != nil || k != 1 {
		t.Fatalf("redrive: %d pages, %v; want the start page", k, err)
	}
	p := testwait.For(t, "the redriven page probed the host at once", func() (crawl.HostDown, bool) {
		p, ok := pauseOf()
		return p, ok && near(p.Since, redriveAt)
	})
	if p.Probes != 1 || !near(p.GivesUpAt, redriveAt.Add(time.Minute)) {
		t.Errorf("host pause after the redrive %+v; want a new streak of 1 probe that gives up a minute after the redrive", p)
	}
	if r, err := worker.Crawler.Get(ctx, s.RunID); err != nil || r.State != crawl.StateRunning {
		t.Fatalf("run %+v, %v after the redriven page's probe failed; want it running, its page waiting", r, err)
	}
	failPastTheLimit()

	// Redriven once the site is back: fetched at once, with every item.
	sw.up()
	if k, err := cli.Crawler.Redrive(ctx, s.RunID); err != nil || k != 1 {
		t.Fatalf("second redrive: %d pages, %v; want the start page", k, err)
	}
	r := waitRun(t, worker.Crawler, s.RunID, time.Minute)
	stored, err := items.CountItems(ctx, pool, s.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != crawl.StateSucceeded || stored != int64(site.Expected().Items) {
		t.Fatalf("after the second redrive: run %s with %d items; want succeeded with %d", r.State, stored, site.Expected().Items)
	}
	lines, err := runlog.ReadAll(ctx, logs, s.RunID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	cleared := 0
	for _, l := range lines {
		text = append(text, l.Text)
		if strings.Contains(l.Text, "redrive: host "+strings.TrimPrefix(sw.base(), "http://")+"'s pause cleared") {
			cleared++
		}
	}
	if cleared != 2 {
		t.Errorf("%d lines of the run log say the host's pause was cleared; want 2 (one per redrive):\n%s", cleared, strings.Join(text, "\n"))
	}
}
