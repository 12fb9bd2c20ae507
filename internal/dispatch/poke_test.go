package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"crawlq/internal/clock"
	"crawlq/internal/dbtest"
	"crawlq/internal/dispatch"
	"crawlq/internal/lambdafn"
	"crawlq/internal/queue"
)

// The api's poke starts workers for what waits, and leaves the maintenance to the scheduled ticks: a
// lease that expired is rescued by a tick, not by a poke. The dispatcher's clock runs two minutes
// ahead of the lease, so the lease is past due for both calls.
func TestPokeFansOutAndLeavesMaintenanceToTheTick(t *testing.T) {
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
	ahead := queue.New(pool, queue.Config{Clock: clock.NewStopped(time.Now().Add(2 * time.Minute))})
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

// pokeRig is a Dispatcher whose PublishRuns reports each round's runs on published and then
// blocks until release is closed (or the round's context ends).
type pokeRig struct {
	d         *dispatch.Dispatcher
	rec       *recorder
	published chan []int64
	mu        sync.Mutex
	release   chan struct{}
}

func newPokeRig(t *testing.T, qc *queue.Client, margin time.Duration) *pokeRig {
	t.Helper()
	r := &pokeRig{rec: &recorder{next: motoLambda(t)}, published: make(chan []int64, 10), release: make(chan struct{})}
	d, err := dispatch.New(dispatch.Config{Queue: qc, Invoker: r.rec, WorkerFunction: "crawlq-worker", WorkerMax: 3, Lookahead: -1,
		DeadlineMargin: margin,
		PublishRuns: func(ctx context.Context, runIDs []int64) (int, error) {
			r.published <- runIDs
			r.mu.Lock()
			release := r.release
			r.mu.Unlock()
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
	r.d = d
	return r
}

// open lets the rounds blocked in PublishRuns, and all later ones, go on; close makes later ones
// block again.
func (r *pokeRig) open() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.release)
}

func (r *pokeRig) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.release = make(chan struct{})
}

type pokeAnswer struct {
	res dispatch.Result
	err error
}

// poke pokes in a goroutine of its own.
func (r *pokeRig) poke(ctx context.Context, runs ...int64) chan pokeAnswer {
	ch := make(chan pokeAnswer, 1)
	go func() {
		res, err := r.d.Poke(ctx, runs)
		ch <- pokeAnswer{res, err}
	}()
	return ch
}

// received waits (boundedly, so a poke that blocks instead of joining fails the test) for a
// round's publish.
func (r *pokeRig) received(t *testing.T, ctx context.Context) []int64 {
	t.Helper()
	select {
	case got := <-r.published:
		return got
	case <-ctx.Done():
		t.Fatal("no publish within a minute")
		return nil
	}
}

// Pokes that arrive while one is promoting and fanning out join it: they return at once, and it
// goes round once more, starting workers for the jobs committed before they poked and
// publishing their runs' events. A poke that fails leaves the runs that joined it to the next.
func TestPokesJoinTheRunningOne(t *testing.T) {
	pool := dbtest.Pool(t)
	qc := queue.New(pool, queue.Config{})
	rig := newPokeRig(t, qc, 0)
	d := rig.d
	ctx, cancelAll := context.WithTimeout(context.Background(), time.Minute)
	defer cancelAll()
	first := rig.poke(ctx, 1)
	if got := rig.received(t, ctx); len(got) != 1 || got[0] != 1 {
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
	rig.open()
	if got := rig.received(t, ctx); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("second round published %v, want [2 3]", got)
	}
	a := <-first
	if a.err != nil || a.res.Joined != 2 || a.res.Invoked["crawl"] != 1 || a.res.Events != 3 || a.res.Coalesced {
		t.Fatalf("the running poke: %+v, %v; want 2 joined, 1 worker started, 3 runs' events", a.res, a.err)
	}
	if ins, _ := rig.rec.calls(); len(ins) != 1 {
		t.Fatalf("%d worker invocations, want 1", len(ins))
	}

	// A poke whose second round fails: the run that joined it is served by the next poke.
	rig.close()
	cctx, cancel := context.WithCancel(ctx)
	failing := rig.poke(cctx, 4)
	rig.received(t, ctx)
	if res, _ := d.Poke(ctx, []int64{5}); !res.Coalesced {
		t.Fatalf("poke of run 5 during another: %+v; want it coalesced", res)
	}
	cancel()
	rig.open()
	if a := <-failing; !errors.Is(a.err, context.Canceled) || a.res.Joined != 0 || a.res.HandedOver != 1 {
		t.Fatalf("poke with its context cancelled: %+v, %v; want its second round to fail, handing the joined poke on", a.res, a.err)
	}
	next := rig.poke(ctx, 6)
	if got := rig.received(t, ctx); len(got) != 2 || got[0] != 6 || got[1] != 5 {
		t.Fatalf("the next poke published %v, want [6 5]", got)
	}
	if a := <-next; a.err != nil || a.res.Coalesced || a.res.Events != 2 || a.res.Joined != 1 {
		t.Fatalf("the next poke: %+v, %v; want it to run, serve the poke handed on and publish 2 runs' events", a.res, a.err)
	}
}

// A poke with less than DeadlineMargin left does not go round again for the pokes that joined
// it: it returns without error and leaves them to the next poke, which serves them in its first
// round. Under a steady stream of pokes the work moves from poke to poke instead of one poke
// going round until its context expires and its last round fails.
func TestPokeNearItsDeadlineHandsJoinersOn(t *testing.T) {
	pool := dbtest.Pool(t)
	rig := newPokeRig(t, queue.New(pool, queue.Config{}), time.Hour) // every deadline is near
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first := rig.poke(ctx, 1)
	if got := rig.received(t, ctx); len(got) != 1 || got[0] != 1 {
		t.Fatalf("first round published %v, want [1]", got)
	}
	if res, err := rig.d.Poke(ctx, []int64{2}); err != nil || !res.Coalesced {
		t.Fatalf("poke during another: %+v, %v; want it coalesced", res, err)
	}
	rig.open()
	if a := <-first; a.err != nil || a.res.Joined != 0 || a.res.HandedOver != 1 || a.res.Events != 1 {
		t.Fatalf("the poke near its deadline: %+v, %v; want no error, 1 poke handed on, its own run's event", a.res, a.err)
	}
	next := rig.poke(ctx, 3)
	if got := rig.received(t, ctx); len(got) != 2 || got[0] != 3 || got[1] != 2 {
		t.Fatalf("the next poke published %v, want [3 2]", got)
	}
	if a := <-next; a.err != nil || a.res.Joined != 1 || a.res.HandedOver != 0 || a.res.Events != 2 {
		t.Fatalf("the next poke: %+v, %v; want it to serve the poke handed on", a.res, a.err)
	}
}
