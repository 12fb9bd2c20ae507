package dispatch_test

import (
	"context"
	"testing"
	"time"

	"crawlq/internal/clock"
	"crawlq/internal/dbtest"
	"crawlq/internal/dispatch"
	"crawlq/internal/maintain"
	"crawlq/internal/queue"
)

// A tick runs a maintenance pass (its clock moved two days on, so a job finished now is past the
// 24h window) and reports it; a second tick within the interval does not run another.
func TestTickRunsMaintenance(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx := context.Background()
	qc := queue.New(pool, queue.Config{})
	for _, delay := range []time.Duration{0, time.Hour} {
		if _, err := qc.Enqueue(ctx, queue.EnqueueParams{Queue: "crawl", Kind: "noop", Delay: delay}); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := qc.Claim(ctx, queue.ClaimParams{Queue: "crawl", Worker: "t", Limit: 1, Lease: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	if err := qc.Complete(ctx, jobs[0].Lease()); err != nil {
		t.Fatal(err)
	}
	m, err := maintain.New(qc, nil, maintain.Config{Interval: time.Hour, Clock: clock.NewStopped(time.Now().Add(48 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatch.New(dispatch.Config{Queue: qc, LambdaQueues: []string{}, Lookahead: -1, Maintain: m})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Maintenance == nil || res.Maintenance.Jobs != 1 {
		t.Fatalf("tick's maintenance: %+v", res.Maintenance)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM crawlq_job WHERE state = 'scheduled'`).Scan(&left); err != nil || left != 1 {
		t.Fatalf("the delayed job: %d left (%v)", left, err)
	}
	// A tick that runs by itself (a Lambda's schedule, crawlq local's loop) tells a test what it
	// did through the dispatcher's Ticked signal.
	d.TestSignals.Ticked.Init()
	go d.Tick(ctx)
	if done := d.TestSignals.Ticked.Wait(t); done.Err != nil || done.Result.Maintenance != nil {
		t.Fatalf("second tick within the interval: %+v %v", done.Result.Maintenance, done.Err)
	}
}
