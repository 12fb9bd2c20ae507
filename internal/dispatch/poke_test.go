package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
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

// Pokes that arrive while one is promoting and fanning out join it: they return at once, and it
// goes round once more, starting workers for the jobs committed before they poked and
// publishing their runs' events. A poke that fails leaves the runs that joined it to the next.
func TestPokesJoinTheRunningOne(t *testing.T) {
	lc := motoLambda(t)
	pool := dbtest.Pool(t)
	ctx := context.Background()
	qc := queue.New(pool, queue.Config{})
	published := make(chan []int64, 10)
	release := make(chan struct{})
	rec := &recorder{next: lc}
	d, err := dispatch.New(dispatch.Config{Queue: qc, Invoker: rec, WorkerFunction: "crawlq-worker", WorkerMax: 3, Lookahead: -1,
		PublishRuns: func(ctx context.Context, runIDs []int64) (int, error) {
			published <- runIDs
			select {
			case <-release:
				return len(runIDs), nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res dispatch.Result
		err error
	}
	pokeA := func(ctx context.Context, runs ...int64) chan answer {
		ch := make(chan answer, 1)
		go func() {
			res, err := d.Poke(ctx, runs)
			ch <- answer{res, err}
		}()
		return ch
	}

	// Waits are bounded, so that a poke that blocks instead of joining fails the test.
	ctx, cancelAll := context.WithTimeout(ctx, time.Minute)
	defer cancelAll()
	received := func() []int64 {
		select {
		case got := <-published:
			return got
		case <-ctx.Done():
			t.Fatal("no publish within a minute")
			return nil
		}
	}
	first := pokeA(ctx, 1)
	if got := received(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("first round published %v, want [1]", got)
	}
	// The first poke is in its round (it found no job to start a worker for). A job is enqueued,
	// and two schedules poke.
	if _, err := qc.Enqueue(ctx, queue.EnqueueParams{Queue: "crawl", Kind: "noop"}); err != nil {
		t.Fatal(err)
	}
	for _, run := range []int64{2, 3} {
		res, err := d.Poke(ctx, []int64{run})
		if err != nil || !res.Coalesced || res.Invoked["crawl"] != 0 || res.Events != 0 {
			t.Fatalf("poke of run %d during another: %+v, %v; want it coalesced, doing nothing itself", run, res, err)
		}
	}
	close(release)
	if got := received(); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("second round published %v, want [2 3]", got)
	}
	a := <-first
	if a.err != nil || a.res.Joined != 2 || a.res.Invoked["crawl"] != 1 || a.res.Events != 3 || a.res.Coalesced {
		t.Fatalf("the running poke: %+v, %v; want 2 joined, 1 worker started, 3 runs' events", a.res, a.err)
	}
	if ins, _ := rec.calls(); len(ins) != 1 {
		t.Fatalf("%d worker invocations, want 1", len(ins))
	}

	// A poke whose second round fails: the run that joined it is served by the next poke.
	release = make(chan struct{})
	cctx, cancel := context.WithCancel(ctx)
	failing := pokeA(cctx, 4)
	received()
	if res, _ := d.Poke(ctx, []int64{5}); !res.Coalesced {
		t.Fatalf("poke of run 5 during another: %+v; want it coalesced", res)
	}
	cancel()
	close(release)
	if a := <-failing; !errors.Is(a.err, context.Canceled) || a.res.Joined != 0 {
		t.Fatalf("poke with its context cancelled: %+v, %v; want its second round to fail, serving no joined poke", a.res, a.err)
	}
	next := pokeA(ctx, 6)
	if got := received(); len(got) != 2 || got[0] != 6 || got[1] != 5 {
		t.Fatalf("the next poke published %v, want [6 5]", got)
	}
	if a := <-next; a.err != nil || a.res.Coalesced || a.res.Events != 2 {
		t.Fatalf("the next poke: %+v, %v; want it to run and publish 2 runs' events", a.res, a.err)
	}
}
