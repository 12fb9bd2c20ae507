package dispatch_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"crawlq/internal/dbtest"
	"crawlq/internal/dispatch"
	"crawlq/internal/lambdafn"
	"crawlq/internal/queue"
)

// The api's poke starts workers for what waits, and leaves the upkeep to the scheduled ticks: a
// lease that expired is rescued by a tick, not by a poke. The dispatcher's clock runs two minutes
// ahead of the lease, so the lease is past due for both calls.
func TestPokeFansOutAndLeavesUpkeepToTheTick(t *testing.T) {
	lc := motoLambda(t)
	pool := dbtest.Pool(t)
	ctx := context.Background()
	qc := queue.New(pool, queue.Config{})
	if _, err := qc.Enqueue(ctx, queue.EnqueueParams{Queue: "crawl", Kind: "noop"}); err != nil {
		t.Fatal(err)
	}
	held, err := qc.Claim(ctx, queue.ClaimParams{Queue: "crawl", Limit: 1, Lease: time.Minute})
	if err != nil || len(held) != 1 {
		t.Fatalf("claim: %d jobs, %v", len(held), err)
	}
	if _, err := qc.Enqueue(ctx, queue.EnqueueParams{Queue: "crawl", Kind: "noop"}); err != nil {
		t.Fatal(err)
	}
	ahead := queue.New(pool, queue.Config{Now: func() time.Time { return time.Now().Add(2 * time.Minute) }})
	rec := &recorder{next: lc}
	d, err := dispatch.New(dispatch.Config{Queue: ahead, Invoker: rec, WorkerFunction: "crawlq-worker", WorkerMax: 3, Lookahead: -1})
	if err != nil {
		t.Fatal(err)
	}
	handle := lambdafn.Dispatch(d)

	res, err := handle(ctx, json.RawMessage(`{"source":"`+dispatch.PokeSource+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Invoked["crawl"] != 1 || res.Rescued != 0 {
		t.Fatalf("poke: %+v; want one worker invoked and nothing rescued", res)
	}
	j, err := qc.Get(ctx, held[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != queue.StateRunning {
		t.Fatalf("after the poke the expired job is %s, want still running", j.State)
	}

	res, err = handle(ctx, json.RawMessage(`{"source":"schedule"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Rescued != 1 {
		t.Fatalf("tick: %+v; want the expired lease rescued", res)
	}
}
