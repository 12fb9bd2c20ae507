package events_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/events"
	"crawlq/internal/fetch"
	"crawlq/internal/monitor"
	"crawlq/internal/node"
	"crawlq/internal/spider"
	"crawlq/internal/spiderstore"
	"crawlq/internal/testwait"
)

// A spec pushed to the store (not loaded in-process) is judged by the monitors its run's version
// declares: version 1 asks for at least 1 item and passes, version 2 for at least 5 and fails,
// each on a run that yields one item.
func TestStoredSpecMonitorsJudgeTheVersionRun(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx := ctxT(t, 2*time.Minute)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><body><h1>only item</h1></body></html>`)
	}))
	t.Cleanup(srv.Close)
	spec := func(minItems int) []byte {
		return fmt.Appendf(nil, "name: pushed\nstart_urls: [%q]\nobey_robots: false\nitems:\n  - key: title\n    fields: {title: {css: h1}}\nmonitors: {min_items: %d}\n",
			srv.URL+"/", minItems)
	}
	n, err := node.New(node.Config{Pool: pool, Spiders: spider.NewRegistry(), MaintainEvery: 100 * time.Millisecond, Fetch: fetch.Config{AllowLoopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, min := range []int{1, 5} {
		if _, err := n.Store.Push(ctx, spiderstore.File{Name: "pushed.yaml", Data: spec(min)}, ""); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("node: %v", err)
		}
		n.Pipeline.Close(context.Background())
	}()
	p := newPublisher(t, events.Config{Pool: pool, Monitors: n.Spiders.Monitors})
	for _, c := range []struct {
		version, verdict string
	}{{"1", monitor.StatusPassed}, {"", monitor.StatusFailed}} {
		s, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "pushed", Version: c.version})
		if err != nil {
			t.Fatal(err)
		}
		r := testwait.For(t, fmt.Sprintf("run %d finishes", s.RunID), func() (*crawl.Run, bool) {
			r, err := n.Crawler.Get(ctx, s.RunID)
			if err != nil {
				t.Fatal(err)
			}
			return r, r.Finished()
		})
		if r.State != crawl.StateSucceeded || r.Stats.Items != 1 {
			t.Fatalf("run %d: %+v, want succeeded with 1 item", s.RunID, r)
		}
		if _, err := p.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		rep := report(t, pool, s.RunID)
		if rep.Monitors != c.verdict || len(rep.Results) != 1 || rep.Results[0].Monitor != spider.MonitorMinItems || rep.Results[0].Status != c.verdict {
			t.Fatalf("run of version %q: report %+v, want min_items %s", c.version, rep, c.verdict)
		}
	}
}

// A run is judged by the monitors of the version on its record; while they cannot be read (the
// spider store is down) the run waits unjudged, and a version deleted since the run is judged
// without monitors rather than never.
func TestJudgingAsksForTheRunsVersion(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx := ctxT(t, 30*time.Second)
	id := fixtureRun(t, pool, "shop", 3, 3, "running", "succeeded")
	if _, err := pool.Exec(ctx, `INSERT INTO crawlq_spider_run (run_id, spider, version) VALUES ($1, 'shop', '7')`, id); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	answer := errors.New("connection refused")
	p := newPublisher(t, events.Config{Pool: pool, Backoff: func(int) time.Duration { return 0 },
		Monitors: func(name, version string) (spider.Monitors, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, name+"@"+version)
			return spider.Monitors{MinItems: ptr(int64(5))}, answer
		}})
	if _, err := p.Drain(ctx); err == nil {
		t.Fatal("drain while the monitors cannot be read: no error")
	}
	if got, err := events.Reports(ctx, pool, []int64{id}); err != nil || got[id] != nil {
		t.Fatalf("judged without its monitors: %+v %v", got[id], err)
	}
	mu.Lock()
	answer = nil
	mu.Unlock()
	if _, err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if rep := report(t, pool, id); rep.Monitors != monitor.StatusFailed {
		t.Fatalf("report %+v, want min_items 5 failed on 3 items", rep)
	}
	mu.Lock()
	if len(asked) != 2 || asked[0] != "shop@7" || asked[1] != "shop@7" {
		t.Fatalf("monitors asked for %v, want shop@7 twice", asked)
	}
	mu.Unlock()

	gone := fixtureRun(t, pool, "shop", 3, 3, "running", "succeeded")
	p = newPublisher(t, events.Config{Pool: pool, Monitors: func(name, version string) (spider.Monitors, error) {
		return spider.Monitors{}, fmt.Errorf("%w %q of spider %q", spider.ErrUnknownVersion, version, name)
	}})
	if _, err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if rep := report(t, pool, gone); rep.Monitors != monitor.StatusNone {
		t.Fatalf("report of a run whose version is gone: %+v, want judged without monitors", rep)
	}
}
