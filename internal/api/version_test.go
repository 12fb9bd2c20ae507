package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"crawlq/internal/api"
	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/fetch"
	"crawlq/internal/node"
	"crawlq/internal/spider"
	"crawlq/internal/spiderstore"
	"crawlq/internal/testwait"
)

// A run of a stored spec records the version it started with, however it was scheduled: through
// the api, and as `crawlq schedule` does (the crawler directly, which writes no record), so
// status and listjobs say what each run ran.
func TestSpecRunRecordsTheVersionItStarted(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	n, err := node.New(node.Config{Pool: pool, Queues: []string{"crawl"}, MaintainEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	a, err := api.New(api.Config{Crawler: n.Crawler, Queue: n.Queue, Spiders: n.Spiders, Store: n.Store})
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{api: a, pool: pool}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Nothing listens on port 9: the runs start (their start pages are queued) and then fail,
	// which is all this test needs.
	viaAPI := f.ok(t, `{"action":"schedule","spider":"demo","args":{"base_url":"http://127.0.0.1:9"}}`)["jobid"].(string)
	direct, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "demo", Args: map[string]string{"base_url": "http://127.0.0.1:9"}})
	if err != nil {
		t.Fatal(err)
	}
	want := n.Spiders.Version("demo")
	if want == "" {
		t.Fatal("the demo spec has no stored version; the api should have pushed the built-in specs")
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

	for _, job := range []string{viaAPI, fmt.Sprint(direct.RunID)} {
		testwait.For(t, fmt.Sprintf("run %s started with version %q", job, want), func() (map[string]any, bool) {
			j := f.ok(t, `{"action":"status","job":"`+job+`"}`)["job"].(map[string]any)
			return j, j["started_at"] != nil && j["version"] == want
		})
	}
}

// headingsSite serves one page whose h1 says "one" and whose h2 says "two".
func headingsSite(t *testing.T) string {
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

// The user's path with Scrapyd's _version: push version 1 of a spec, push version 2, schedule
// version 1; the run runs version 1 (its items are what version 1's selectors take), and status
// and listjobs say so. A run without a pin runs the newest; a version never pushed is refused,
// named.
func TestScheduleAnOlderVersion(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	n, err := node.New(node.Config{Pool: pool, Queues: []string{"crawl"}, MaintainEvery: -1, Fetch: fetch.Config{AllowLoopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := api.New(api.Config{Crawler: n.Crawler, Queue: n.Queue, Spiders: n.Spiders, Store: n.Store})
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{api: a, pool: pool}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := headingsSite(t)
	spec := func(sel string) string {
		s, err := json.Marshal(fmt.Sprintf("name: heading\nstart_urls: [%q]\nobey_robots: false\nitems:\n  - key: title\n    fields: {title: {css: %s, required: true}}\n", start, sel))
		if err != nil {
			t.Fatal(err)
		}
		return string(s)
	}
	if v := f.ok(t, `{"action":"pushspider","spec":`+spec("h1")+`}`)["version"]; v != "1" {
		t.Fatalf("first push: version %v", v)
	}
	if v := f.ok(t, `{"action":"pushspider","spec":`+spec("h2")+`}`)["version"]; v != "2" {
		t.Fatalf("second push: version %v", v)
	}
	out := f.call(t, `{"action":"schedule","project":"default","spider":"heading","_version":"3"}`)
	if msg, _ := out["message"].(string); out["status"] != "error" || !strings.Contains(msg, `unknown version "3" of spider "heading" (its versions: 1, 2)`) {
		t.Fatalf("schedule version 3: %v", out)
	}
	pinned := f.ok(t, `{"action":"schedule","project":"default","spider":"heading","_version":"1","jobid":"pinned-1"}`)["jobid"].(string)
	if j := f.ok(t, `{"action":"status","job":"pinned-1"}`)["job"].(map[string]any); j["version"] != "1" {
		t.Fatalf("a pinned run before it starts: %v, want version 1", j)
	}
	newest := f.ok(t, `{"action":"schedule","spider":"heading"}`)["jobid"].(string)

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

	want := map[string]struct{ version, title string }{pinned: {"1", "one"}, newest: {"2", "two"}}
	for job, w := range want {
		j := testwait.For(t, fmt.Sprintf("run %s finishes", job), func() (map[string]any, bool) {
			st := f.ok(t, `{"action":"status","job":"`+job+`"}`)
			return st["job"].(map[string]any), st["currstate"] == "finished"
		})
		var title string
		if err := pool.QueryRow(ctx, `SELECT data->>'title' FROM crawlq_item WHERE run_id = $1`, j["run_id"]).Scan(&title); err != nil {
			t.Fatalf("run %s: its item: %v", job, err)
		}
		if j["outcome"] != "succeeded" || j["version"] != w.version || j["items"] != float64(1) || title != w.title {
			t.Errorf("run %s: %v with title %q; want succeeded, version %s, one item titled %q", job, j, title, w.version, w.title)
		}
	}
	fin := f.ok(t, `{"action":"listjobs","spider":"heading"}`)["finished"].([]any)
	got := map[string]any{}
	for _, j := range fin {
		got[j.(map[string]any)["id"].(string)] = j.(map[string]any)["version"]
	}
	if len(got) != 2 || got[pinned] != "1" || got[newest] != "2" {
		t.Fatalf("listjobs versions %v, want %s at 1 and %s at 2", got, pinned, newest)
	}
}

// countingSource is the spider store, counting the listings of every stored name.
type countingSource struct {
	*spiderstore.Store
	names atomic.Int64
}

func (c *countingSource) Names(ctx context.Context) ([]string, error) {
	c.names.Add(1)
	return c.Store.Names(ctx)
}

// Schedule checks the one name it is given through the registry's cache: it lists every stored
// spider only to say which exist when the name is unknown.
func TestScheduleDoesNotListSpiders(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	store, err := spiderstore.New(spiderstore.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	src := &countingSource{Store: store}
	reg, err := node.LoadSpiders("")
	if err != nil {
		t.Fatal(err)
	}
	reg.SetSource(spider.SourceConfig{Source: src})
	n, err := node.New(node.Config{Pool: pool, Spiders: reg, Store: store, MaintainEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Pipeline.Close(context.Background())
	a, err := api.New(api.Config{Crawler: n.Crawler, Queue: n.Queue, Spiders: n.Spiders, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{api: a, pool: pool}
	for range 20 {
		f.ok(t, `{"action":"schedule","spider":"demo","args":{"base_url":"http://127.0.0.1:9"},"delay_seconds":3600}`)
	}
	f.ok(t, `{"action":"schedule","spider":"demo","version":"1","delay_seconds":3600}`)
	f.ok(t, `{"action":"listjobs","spider":"demo"}`)
	if n := src.names.Load(); n != 0 {
		t.Fatalf("22 calls naming a known spider listed every stored spider %d times", n)
	}
	out := f.call(t, `{"action":"schedule","spider":"nope"}`)
	if msg, _ := out["message"].(string); !strings.Contains(msg, `unknown spider "nope": known spiders are [`) || !strings.Contains(msg, "demo") {
		t.Fatalf("schedule an unknown spider: %v", out)
	}
	if n := src.names.Load(); n != 1 {
		t.Fatalf("an unknown name listed the stored spiders %d times, want once, for the message", n)
	}
}
