package queue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/queue"
)

// The batched variants go out with the caller's own statements in one round trip and report
// what the unbatched ones do: lost leases, new ids, exact counts.
func TestBatchedCompleteAndEnqueue(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	ctx := ctxT(t)
	for range 3 {
		enqueue(t, c, queue.EnqueueParams{})
	}
	jobs := claim(t, c, 3, time.Minute)
	// Job 0 changes hands: its old lease is stale.
	if _, err := c.Release(ctx, []queue.Lease{jobs[0].Lease()}); err != nil {
		t.Fatal(err)
	}
	again := claim(t, c, 1, time.Minute)
	if len(again) != 1 || again[0].ID != jobs[0].ID {
		t.Fatalf("reclaim: %+v", again)
	}
	leases := []queue.Lease{jobs[0].Lease(), jobs[1].Lease(), jobs[2].Lease()}
	ps := []queue.EnqueueParams{{Queue: "q", Kind: "child", ParentID: jobs[1].ID}, {Queue: "q", Kind: "child", Priority: 3}}

	// A lost lease is reported once the results are read; the caller rolls back.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := &pgx.Batch{}
	var lost []int64
	c.CompleteManyBatch(b, leases, &lost)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(lost) != fmt.Sprint([]int64{jobs[0].ID}) {
		t.Fatalf("lost %v, want [%d]", lost, jobs[0].ID)
	}
	tx.Rollback(ctx)

	// The held leases complete and the children are inserted in one implicit transaction.
	b = &pgx.Batch{}
	lost = nil
	c.CompleteManyBatch(b, leases[1:], &lost)
	out := make([]queue.EnqueueResult, len(ps))
	if err := c.EnqueueManyBatch(b, ps, out); err != nil {
		t.Fatal(err)
	}
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if len(lost) != 0 {
		t.Fatalf("lost %v", lost)
	}
	for i, r := range out {
		got, err := c.Get(ctx, r.ID)
		if err != nil || r.Duplicate || got.Kind != "child" || got.State != queue.StateAvailable || got.ParentID != ps[i].ParentID || got.Priority != ps[i].Priority {
			t.Fatalf("child %d: %+v %+v %v", i, r, got, err)
		}
	}
	for _, j := range jobs[1:] {
		if got, _ := c.Get(ctx, j.ID); got.State != queue.StateSucceeded {
			t.Fatalf("job %d: %s, want succeeded", j.ID, got.State)
		}
	}
	if a, s := actualCounts(t, pool), statCounts(t, c); fmt.Sprint(a) != fmt.Sprint(s) {
		t.Fatalf("counts %v, rows %v", s, a)
	}
}

func TestEnqueueManyBatchRejectsBadInput(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t)
	for name, ps := range map[string][]queue.EnqueueParams{
		"unique key": {{Queue: "q", Kind: "k", UniqueKey: "u"}},
		"no kind":    {{Queue: "q"}},
		"bad queue":  {{Queue: "no spaces", Kind: "k"}},
	} {
		b := &pgx.Batch{}
		err := c.EnqueueManyBatch(b, ps, make([]queue.EnqueueResult, len(ps)))
		if !errors.Is(err, queue.ErrInvalid) || b.Len() != 0 {
			t.Errorf("%s: err %v, %d statements queued; want ErrInvalid and none", name, err, b.Len())
		}
	}
	b := &pgx.Batch{}
	if err := c.EnqueueManyBatch(b, []queue.EnqueueParams{{Queue: "q", Kind: "k"}}, nil); !errors.Is(err, queue.ErrInvalid) || b.Len() != 0 {
		t.Errorf("short results slice: err %v", err)
	}
}

// A job handed to a worker through a reservation runs there without a claim, exactly once, with
// its lease kept alive; a cancelled reservation gives its room back; a worker that stopped
// releases what it is handed.
func TestReservationHandsJobsToTheWorker(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	ctx := ctxT(t)
	ran := make(chan *queue.Job, 100)
	w, err := queue.NewWorker(c, queue.WorkerConfig{Queue: "q", Concurrency: 2, BatchSize: 4, Lease: 600 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond, PollInterval: time.Hour}, func(ctx context.Context, j *queue.Job) error {
		time.Sleep(time.Second) // longer than the lease: only heartbeats keep it
		ran <- j
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { defer close(stopped); w.Run(wctx) }()

	// Once the worker's first claim (which finds nothing) is over, all its room is free.
	var r *queue.Reservation
	waitFor(t, 10*time.Second, func() bool {
		if r = w.Reserve(100); r != nil && r.Len() == 4 {
			return true
		}
		r.Cancel()
		return false
	})
	if w.Reserve(1) != nil {
		t.Fatal("reserved beyond the worker's room")
	}
	r.Cancel()
	r = w.Reserve(3)
	if r == nil || r.Len() != 3 {
		t.Fatalf("room not given back by Cancel: %v", r)
	}
	for name, ps := range map[string][]queue.EnqueueParams{
		"too many":    {{Queue: "q", Kind: "k"}, {Queue: "q", Kind: "k"}, {Queue: "q", Kind: "k"}, {Queue: "q", Kind: "k"}},
		"unique key":  {{Queue: "q", Kind: "k", UniqueKey: "u"}},
		"delayed":     {{Queue: "q", Kind: "k", Delay: time.Second}},
		"other queue": {{Queue: "other", Kind: "k"}},
	} {
		b := &pgx.Batch{}
		if err := r.EnqueueBatch(b, ps); !errors.Is(err, queue.ErrInvalid) || b.Len() != 0 {
			t.Errorf("%s: err %v, %d statements; want ErrInvalid and none", name, err, b.Len())
		}
	}
	b := &pgx.Batch{}
	if err := r.EnqueueBatch(b, []queue.EnqueueParams{{Queue: "q", Kind: "k", Args: []byte(`{"n":1}`)}, {Queue: "q", Kind: "k", Priority: 7}}); err != nil {
		t.Fatal(err)
	}
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	r.Hand()
	got := map[int64]bool{}
	for range 2 {
		select {
		case j := <-ran:
			if j.Attempt != 1 || j.Kind != "k" || j.LeaseToken == 0 {
				t.Fatalf("handed job %+v", j)
			}
			got[j.ID] = true
		case <-time.After(30 * time.Second):
			t.Fatal("handed jobs did not run")
		}
	}
	waitFor(t, 10*time.Second, func() bool { return stats(t, c).Succeeded == 2 })
	if s := stats(t, c); s.Running != 0 || s.Available != 0 || w.Stats().Lost != 0 || w.Stats().Claimed != 2 {
		t.Fatalf("stats %+v, worker %+v; want 2 succeeded, none lost", s, w.Stats())
	}

	// Handed to a stopped worker: released for others, attempt not counted.
	r = w.Reserve(1)
	stop()
	<-stopped
	b = &pgx.Batch{}
	if err := r.EnqueueBatch(b, []queue.EnqueueParams{{Queue: "q", Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	r.Hand()
	if w.Reserve(1) != nil {
		t.Fatal("a stopped worker took a reservation")
	}
	jobs := claim(t, c, 10, time.Minute)
	if len(jobs) != 1 || jobs[0].Attempt != 1 {
		t.Fatalf("after hand to a stopped worker, claimed %+v; want the job, on attempt 1", jobs)
	}
	if a, s := actualCounts(t, pool), statCounts(t, c); fmt.Sprint(a) != fmt.Sprint(s) {
		t.Fatalf("counts %v, rows %v", s, a)
	}
}
