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

// The batched variants go out with the caller's own statements in one round trip: a lost lease
// aborts the whole transaction and names the job; otherwise completions and inserts commit
// together with exact counts.
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

	send := func(leases []queue.Lease) ([]queue.EnqueueResult, error) {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		c.CompleteAllBatch(b, leases)
		out := make([]queue.EnqueueResult, len(ps))
		if err := c.EnqueueManyBatch(b, ps, 0, out); err != nil {
			t.Fatal(err)
		}
		b.Queue("COMMIT")
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		err = conn.SendBatch(ctx, b).Close()
		if err != nil {
			conn.Exec(ctx, "ROLLBACK")
		}
		return out, err
	}
	_, err := send(leases)
	var lost *queue.LeaseLostError
	if !errors.As(err, &lost) || !errors.Is(err, queue.ErrLeaseLost) || fmt.Sprint(lost.IDs) != fmt.Sprint([]int64{jobs[0].ID}) {
		t.Fatalf("err %v; want a LeaseLostError for job %d", err, jobs[0].ID)
	}
	if s := stats(t, c); s.Running != 3 || s.Succeeded != 0 || s.Available != 0 {
		t.Fatalf("after the aborted batch: %+v; want nothing changed", s)
	}

	out, err := send(leases[1:])
	if err != nil {
		t.Fatal(err)
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

// A once key holds per parent for good, after its job has finished; within one call the first
// job with it wins; a limit takes the first new jobs and still uses the keys of the rest.
func TestOnceKeys(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	ctx := ctxT(t)
	p := func(parent int64, key string) queue.EnqueueParams {
		return queue.EnqueueParams{Queue: "q", Kind: "page", ParentID: parent, OnceKey: key}
	}
	res, err := c.EnqueueMany(ctx, []queue.EnqueueParams{p(1, "a"), p(1, "b"), p(1, "a"), p(2, "a"), {Queue: "q", Kind: "plain"}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].ID == 0 || res[1].ID == 0 || !res[2].Duplicate || res[2].ID != 0 || res[3].ID == 0 || res[4].ID == 0 {
		t.Fatalf("first enqueue: %+v", res)
	}
	// Finished jobs still hold their keys.
	for _, j := range claim(t, c, 10, time.Minute) {
		if err := c.Complete(ctx, j.Lease()); err != nil {
			t.Fatal(err)
		}
	}
	res, err = c.EnqueueMany(ctx, []queue.EnqueueParams{p(1, "a"), p(1, "c")})
	if err != nil || !res[0].Duplicate || res[0].ID != 0 || res[1].Duplicate || res[1].ID == 0 {
		t.Fatalf("after completion: %+v %v", res, err)
	}

	b := &pgx.Batch{}
	ps := []queue.EnqueueParams{p(1, "b"), p(1, "d"), p(1, "e"), p(1, "f")}
	out := make([]queue.EnqueueResult, len(ps))
	if err := c.EnqueueManyBatch(b, ps, 2, out); err != nil {
		t.Fatal(err)
	}
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if !out[0].Duplicate || out[1].ID == 0 || out[2].ID == 0 || out[3].ID != 0 || out[3].Duplicate {
		t.Fatalf("limit 2: %+v; want b duplicate, d and e in, f past the limit", out)
	}
	res, err = c.EnqueueMany(ctx, []queue.EnqueueParams{p(1, "f")})
	if err != nil || !res[0].Duplicate {
		t.Fatalf("a key past the limit is used all the same: %+v %v", res, err)
	}
	if _, err := c.EnqueueMany(ctx, []queue.EnqueueParams{{Queue: "q", Kind: "k", OnceKey: "x", UniqueKey: "x"}}); !errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("once and unique key together: %v", err)
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
		err := c.EnqueueManyBatch(b, ps, 0, make([]queue.EnqueueResult, len(ps)))
		if !errors.Is(err, queue.ErrInvalid) || b.Len() != 0 {
			t.Errorf("%s: err %v, %d statements queued; want ErrInvalid and none", name, err, b.Len())
		}
	}
	b := &pgx.Batch{}
	if err := c.EnqueueManyBatch(b, []queue.EnqueueParams{{Queue: "q", Kind: "k"}}, 0, nil); !errors.Is(err, queue.ErrInvalid) || b.Len() != 0 {
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
	w, err := queue.NewWorker(c, queue.WorkerConfig{Queue: "q", Concurrency: 4, BatchSize: 4, Lease: 600 * time.Millisecond,
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
	if room := w.Room(); room != 1 {
		t.Fatalf("Room() = %d with 3 of 4 reserved, want 1", room)
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
	// A once key used before: that job is skipped, and its room given back with Hand.
	if _, err := c.EnqueueMany(ctx, []queue.EnqueueParams{{Queue: "other", Kind: "k", ParentID: 9, OnceKey: "used"}}); err != nil {
		t.Fatal(err)
	}
	b := &pgx.Batch{}
	if err := r.EnqueueBatch(b, []queue.EnqueueParams{{Queue: "q", Kind: "k", Args: []byte(`{"n":1}`)}, {Queue: "q", Kind: "k", Priority: 7, ParentID: 9, OnceKey: "new"},
		{Queue: "q", Kind: "k", ParentID: 9, OnceKey: "used"}}); err != nil {
		t.Fatal(err)
	}
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if len(r.Jobs()) != 2 {
		t.Fatalf("inserted %d held jobs, want 2 (one once key was used)", len(r.Jobs()))
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
