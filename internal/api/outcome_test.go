package api_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"testing/fstest"

	"crawlq/internal/api"
	"crawlq/internal/dbtest"
	"crawlq/internal/fetch"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
	"crawlq/internal/testwait"
)

const deadSpec = `
name: dead
start_urls: [http://127.0.0.1:9/]
retry: {attempts: 2, backoff: 10ms, host_pause: 10ms, max_host_pause: 20ms, host_down_limit: 50ms}
`

// A run whose start page cannot be fetched shows its outcome, dead pages and their errors in
// status and listjobs; redrive reopens it; bad redrive calls are refused with nothing changed.
func TestOutcomeAndRedrive(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + l.Addr().String()
	l.Close() // nothing listens there
	reg := spider.NewRegistry()
	if err := reg.LoadFS(fstest.MapFS{"dead.yaml": {Data: []byte(deadSpec)}}); err != nil {
		t.Fatal(err)
	}
	pool := dbtest.Pool(t)
	n, err := node.New(node.Config{Pool: pool, Spiders: reg, Worker: queue.WorkerConfig{Concurrency: 2}, Fetch: fetch.Config{AllowLoopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	a, err := api.New(api.Config{Crawler: n.Crawler, Queue: n.Queue, Spiders: n.Spiders})
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{api: a, pool: pool}

	id := f.ok(t, `{"action":"schedule","spider":"dead","args":{"base_url":"`+base+`"}}`)["jobid"].(string)
	if out := f.call(t, `{"action":"redrive","job":"`+id+`"}`); out["status"] != "error" || !strings.Contains(out["message"].(string), "not finished") {
		t.Fatalf("redrive of a live run: %v", out)
	}
	job := testwait.For(t, "the run finishes", func() (map[string]any, bool) {
		st := f.ok(t, `{"action":"status","job":"`+id+`"}`)
		return st["job"].(map[string]any), st["currstate"] == "finished"
	})
	fp, _ := job["failed_pages"].([]any)
	if job["outcome"] != "failed" || job["dead_pages"] != float64(1) || len(fp) != 1 ||
		!strings.Contains(fp[0].(map[string]any)["error"].(string), "refused") {
		t.Fatalf("status of a run whose start page died: %v", job)
	}
	fin := f.ok(t, `{"action":"listjobs","spider":"dead"}`)["finished"].([]any)
	if len(fin) != 1 || fin[0].(map[string]any)["outcome"] != "failed" {
		t.Fatalf("listjobs finished: %v", fin)
	}

	for _, c := range []struct{ payload, want string }{
		{`{"action":"redrive"}`, "job"},
		{`{"action":"redrive","job":"999999"}`, "unknown job"},
		{`{"action":"redrive","job":"x"}`, "job"},
		{`{"action":"redrive","job":"` + id + `","spider":"dead"}`, "does not take"},
	} {
		out := f.call(t, c.payload)
		if out["status"] != "error" || !strings.Contains(out["message"].(string), c.want) {
			t.Errorf("%s: %v; want an error naming %q", c.payload, out, c.want)
		}
	}
	if f.count(t, "crawlq_job WHERE state = 'dead'") != 1 {
		t.Fatal("a refused redrive changed the dead jobs")
	}
	out := f.ok(t, `{"action":"redrive","job":"`+id+`"}`)
	if out["pages"] != float64(1) || out["prevstate"] != "failed" {
		t.Fatalf("redrive: %v", out)
	}
	// The site is still down: the run dies again and finishes again, failed.
	redriven := testwait.For(t, "the redriven run finishes", func() (map[string]any, bool) {
		st := f.ok(t, `{"action":"status","job":"`+id+`"}`)
		return st, st["currstate"] == "finished"
	})
	if o := redriven["job"].(map[string]any)["outcome"]; o != "failed" {
		t.Fatalf("outcome after a redrive against a site still down: %v", o)
	}
}
