package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"crawlq/internal/api"
	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/node"
)

// A run of a stored spec records the version it started with, however it was scheduled: through
// the api, and as `crawlq schedule` does (the crawler directly, which writes no record), so
// status and listjobs say what each run ran.
func TestSpecRunRecordsTheVersionItStarted(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	n, err := node.New(node.Config{Pool: pool, Queues: []string{"crawl"}, Upkeep: -1})
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
		for {
			st := f.ok(t, `{"action":"status","job":"`+job+`"}`)
			j := st["job"].(map[string]any)
			if j["started_at"] != nil && j["version"] == want {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("run %s: status %v, want it started with version %q", job, j, want)
			}
			time.Sleep(50 * time.Millisecond) // polls the condition above
		}
	}
}
