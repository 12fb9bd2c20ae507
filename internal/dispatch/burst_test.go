package dispatch_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"crawlq/internal/dbtest"
	"crawlq/internal/dispatch"
	"crawlq/internal/queue"
	"crawlq/internal/testwait"
)

// A fleet with a Lambda burst: while no runner task heartbeats, the backlog gets worker Lambdas
// (at most Burst) beside the tasks launched for it; once live tasks cover the backlog, no more
// Lambdas start, and live burst Lambdas do not hold back the tasks the backlog wants.
func TestFleetBurstCoversTasksStarting(t *testing.T) {
	lc := motoLambda(t)
	pool := dbtest.Pool(t)
	ctx := context.Background()
	qc := queue.New(pool, queue.Config{})
	for range 45 { // 5 workers' worth at 10 each
		if _, err := qc.Enqueue(ctx, queue.EnqueueParams{Queue: "crawl", Kind: "noop"}); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{next: lc}
	ln := &launcher{}
	d, err := dispatch.New(dispatch.Config{Queue: qc, Invoker: rec, WorkerFunction: "crawlq-worker", LambdaQueues: []string{},
		Fleets: []dispatch.Fleet{{Queue: "crawl", Launcher: ln, Max: 4, Burst: 2}}, Lookahead: -1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Launched != 4 || res.Invoked["crawl"] != 2 {
		t.Fatalf("tick with no live task: %+v; want 4 tasks launched and 2 Lambdas", res)
	}

	// Two burst Lambdas and five runner tasks live (registered, blocking on their jobs'
	// contexts): the backlog is covered, nothing starts; the Lambdas alone would not have been.
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	block := func(ctx context.Context, _ *queue.Job) error { <-ctx.Done(); return ctx.Err() }
	start := func(kind string) {
		w, err := queue.NewWorker(qc, queue.WorkerConfig{Queue: "crawl", Kind: kind, Concurrency: 1, BatchSize: 1,
			StopGrace: 10 * time.Millisecond}, block)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); w.Run(wctx) }()
	}
	start(dispatch.LambdaKind)
	start(dispatch.LambdaKind)
	waitLive := func(kind string, n int) {
		t.Helper()
		testwait.For(t, fmt.Sprintf("%d live %s workers", n, kind), func() (map[string]map[string]int, bool) {
			live, err := qc.LiveWorkers(ctx, "crawl", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return live, live["crawl"][kind] == n
		})
	}
	waitLive(dispatch.LambdaKind, 2)
	res, err = d.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// 43 waiting + 2 running want 5; two live Lambdas do not count against the tasks (cap 4).
	if res.Launched != 4 || res.Invoked["crawl"] != 0 {
		t.Fatalf("tick with 2 live burst Lambdas: %+v; want 4 tasks launched and no Lambda", res)
	}
	for range 5 {
		start("ecs")
	}
	waitLive("ecs", 5)
	res, err = d.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Launched != 0 || res.Invoked["crawl"] != 0 {
		t.Fatalf("tick with 5 live tasks: %+v; want nothing started", res)
	}
}
