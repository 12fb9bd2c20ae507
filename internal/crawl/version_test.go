package crawl_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
	"crawlq/internal/spiderstore"
)

// twoHeadings serves one page whose h1 says "one" and whose h2 says "two": a spec's version shows
// in which one its items took.
func twoHeadings(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `<html><body><h1>one</h1><h2>two</h2></body></html>`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// headingSpec is a spec of the spider "heading" whose one item takes its title from sel.
func headingSpec(start, sel string) string {
	return fmt.Sprintf("name: heading\nstart_urls: [%q]\nobey_robots: false\nitems:\n  - key: title\n    fields: {title: {css: %s, required: true}}\n", start, sel)
}

// runTitles returns the titles of a run's items.
func runTitles(t *testing.T, pool *pgxpool.Pool, runID int64) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT data->>'title' FROM crawlq_item WHERE run_id = $1 ORDER BY key`, runID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var titles []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		titles = append(titles, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(titles, ",")
}

// A run is one version of its spider: the one pinned at schedule, or else the one it started with.
// Its pages run that version even in a process that has never seen the run and already knows a
// newer one (a push between the run's start and its pages).
func TestRunKeepsTheVersionItStartedWith(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx := ctxT(t, 2*time.Minute)
	start := twoHeadings(t)
	store, err := spiderstore.New(spiderstore.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Push(ctx, spiderstore.File{Name: "v1", Data: []byte(headingSpec(start, "h1"))}, ""); err != nil {
		t.Fatal(err)
	}

	// Process A starts the runs (their run jobs only), while version 1 is the newest.
	a, err := node.New(node.Config{Pool: pool, Spiders: spider.NewRegistry(), Store: store, MaintainEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Pipeline.Close(context.Background())
	unpinned, err := a.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "heading"})
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := a.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "heading", Version: "1"})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := a.Queue.Claim(ctx, queue.ClaimParams{Queue: spider.DefaultQueue, Limit: 2})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claim the run jobs: %d %v", len(jobs), err)
	}
	for _, j := range jobs {
		if j.Kind != crawl.KindRun {
			t.Fatalf("claimed a %s job, want the run jobs", j.Kind)
		}
		if err := a.Mux.Work(ctx, j); !errors.Is(err, queue.ErrCompleted) {
			t.Fatalf("run job %d: %v", j.ID, err)
		}
	}

	// Version 2 takes its title from the h2. Process B, which never saw the runs, crawls their
	// pages.
	if _, err := store.Push(ctx, spiderstore.File{Name: "v2", Data: []byte(headingSpec(start, "h2"))}, ""); err != nil {
		t.Fatal(err)
	}
	b, _ := startNode(t, pool, node.Config{Spiders: spider.NewRegistry(), Store: store})
	if v := b.Spiders.Version("heading"); v != "2" {
		t.Fatalf("process B resolves heading to version %q, want 2", v)
	}
	later, err := b.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "heading"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		id      int64
		version string
		titles  string
	}{
		{"unpinned, started at version 1", unpinned.RunID, "1", "one"},
		{"pinned to version 1", pinned.RunID, "1", "one"},
		{"scheduled after version 2", later.RunID, "2", "two"},
	} {
		r := waitRun(t, b.Crawler, c.id, time.Minute)
		rec, err := store.Run(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if got := runTitles(t, pool, c.id); r.State != crawl.StateSucceeded || got != c.titles || rec.Version != c.version {
			t.Errorf("%s: run %s with titles %q, version %q; want succeeded with %q, version %s", c.name, r.State, got, rec.Version, c.titles, c.version)
		}
	}
}

// A pin names a stored version: another is refused at schedule, naming it, and writes nothing.
func TestScheduleRefusesAnUnknownVersion(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx := ctxT(t, time.Minute)
	n, err := node.New(node.Config{Pool: pool, MaintainEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Pipeline.Close(context.Background())
	if _, err := n.Store.Push(ctx, spiderstore.File{Name: "v1", Data: []byte(headingSpec("http://127.0.0.1:9/", "h1"))}, ""); err != nil {
		t.Fatal(err)
	}
	_, err = n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "heading", Version: "7"})
	if !errors.Is(err, crawl.ErrInvalid) || !strings.Contains(err.Error(), `unknown version "7" of spider "heading" (its versions: 1)`) {
		t.Fatalf("schedule version 7: %v", err)
	}
	// demo is built in (loaded in-process) but, with no api to push it, not stored.
	_, err = n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "demo", Version: "1"})
	if !errors.Is(err, crawl.ErrInvalid) || !strings.Contains(err.Error(), "not stored") {
		t.Fatalf("schedule a version of an in-process spider: %v", err)
	}
	var runs int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM crawlq_run`).Scan(&runs); err != nil || runs != 0 {
		t.Fatalf("refused schedules left %d runs (%v)", runs, err)
	}
}
