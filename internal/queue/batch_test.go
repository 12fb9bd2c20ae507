package queue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"crawlq/internal/queue"
	"crawlq/internal/testwait"
)

// A Tx sends completions, inserts and the caller's own statements in one round trip: a lost
// lease commits none of it and names the job; otherwise all of it commits, with exact counts.
func TestTxCompletesAndEnqueuesTogether(t *testing.T) {
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
	if _, err := pool.Exec(ctx, `CREATE TABLE mine (n int)`); err != nil {
		t.Fatal(err)
	}
	leases := []queue.Lease{jobs[0].Lease(), jobs[1].Lease(), jobs[2].Lease()}
	ps := []queue.EnqueueParams{{Queue: "q", Kind: "child", ParentID: jobs[1].ID}, {Queue: "q", Kind: "child", Priority: 3}}

	send := func(leases []queue.Lease, n int) ([]queue.EnqueueResult, error) {
		tx := c.NewTx()
		tx.Complete(leases)
		out := make([]queue.EnqueueResult, len(ps))
		if err := tx.Enqueue(ps, 0, out); err != nil {
			t.Fatal(err)
		}
		tx.Queue(`INSERT INTO mine VALUES ($1)`, n)
		return out, tx.Send(ctx)
	}
	mine := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM mine`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	_, err := send(leases, 1)
	var lost *queue.LeaseLostError
	if !errors.As(err, &lost) || !errors.Is(err, queue.ErrLeaseLost) || fmt.Sprint(lost.IDs) != fmt.Sprint([]int64{jobs[0].ID}) {
		t.Fatalf("err %v; want a LeaseLostError for job %d", err, jobs[0].ID)
	}
	if s := stats(t, c); s.Running != 3 || s.Succeeded != 0 || s.Available != 0 || mine() != 0 {
		t.Fatalf("after the aborted Tx: %+v, %d rows of mine; want nothing changed", s, mine())
	}

	out, err := send(leases[1:], 2)
	if err != nil {
		t.Fatal(err)
	}
	if mine() != 1 {
		t.Fatalf("the caller's statement did not commit with the Tx")
	}
	for i, r := range out {
		got, err := c.Get(ctx, r.ID)
		if err != nil || r.Duplicate || got.Kind != "child" || got.State != queue.StateAvailable || got.ParentID != ps[i].ParentID || got.Priority != ps[i].Priority {
			t.Fatalf("child %d: %+v %+v %v", i, r, got, err)
		}
	}
	for _, j := range jobs[1:] {
		got, err := c.Get(ctx, j.ID)
		if err != nil || got.State != queue.StateSucceeded {
			t.Fatalf("job %d: %+v %v, want succeeded", j.ID, got, err)
		}
	}
	if a, s := actualCounts(t, pool), statCounts(t, c); fmt.Sprint(a) != fmt.Sprint(s) {
		t.Fatalf("counts %v, rows %v", s, a)
	}

	// A statement of the caller's that fails rolls the whole Tx back, and the pool's connection is
	// usable afterwards.
	more := claim(t, c, 1, time.Minute)
	tx := c.NewTx()
	tx.Complete([]queue.Lease{more[0].Lease()})
	tx.Queue(`INSERT INTO nosuchtable VALUES (1)`)
	if err := tx.Send(ctx); err == nil || errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("a failing statement: err %v", err)
	}
	got, err := c.Get(ctx, more[0].ID)
	if err != nil || got.State != queue.StateRunning {
		t.Fatalf("after the failed Tx: %+v %v; want still running", got, err)
	}
	if err := tx.Send(ctx); err == nil {
		t.Fatal("a Tx sent twice")
	}
}

// A once key holds per parent for good, after its job has finished; within one call the first
// job with it wins; a limit takes the first new jobs, and the keys of the rest stay unused.
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

	out, err := c.EnqueueLimitedTx(ctx, pool, []queue.EnqueueParams{p(1, "b"), p(1, "d"), p(1, "e"), p(1, "f")}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !out[0].Duplicate || out[1].ID == 0 || out[2].ID == 0 || out[3].ID != 0 || out[3].Duplicate {
		t.Fatalf("limit 2: %+v; want b duplicate, d and e in, f past the limit", out)
	}
	res, err = c.EnqueueMany(ctx, []queue.EnqueueParams{p(1, "f")})
	if err != nil || res[0].Duplicate || res[0].ID == 0 {
		t.Fatalf("a key past the limit stays unused: %+v %v", res, err)
	}
	if _, err := c.EnqueueMany(ctx, []queue.EnqueueParams{{Queue: "q", Kind: "k", OnceKey: "x", UniqueKey: "x"}}); !errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("once and unique key together: %v", err)
	}
	if a, s := actualCounts(t, pool), statCounts(t, c); fmt.Sprint(a) != fmt.Sprint(s) {
		t.Fatalf("counts %v, rows %v", s, a)
	}
}

func TestTxEnqueueRejectsBadInput(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	for name, ps := range map[string][]queue.EnqueueParams{
		"unique key": {{Queue: "q", Kind: "k", UniqueKey: "u"}},
		"no kind":    {{Queue: "q"}},
		"bad queue":  {{Queue: "no spaces", Kind: "k"}},
	} {
		tx := c.NewTx()
		if err := tx.Enqueue(ps, 0, make([]queue.EnqueueResult, len(ps))); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("%s: err %v; want ErrInvalid", name, err)
		}
		if err := tx.Send(ctxT(t)); err != nil {
			t.Errorf("%s: sending what is left: %v", name, err)
		}
		if _, err := c.EnqueueLimitedTx(ctxT(t), pool, ps, 0); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("%s: EnqueueLimitedTx: err %v; want ErrInvalid", name, err)
		}
	}
	if err := c.NewTx().Enqueue([]queue.EnqueueParams{{Queue: "q", Kind: "k"}}, 0, nil); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("short results slice: err %v", err)
	}
	if s := stats(t, c); s != (queue.QueueStats{Queue: "q"}) {
		t.Errorf("stats %+v; want nothing inserted", s)
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
	signals := &queue.WorkerTestSignals{}
	signals.Outcome.Init()
	w, err := queue.NewWorker(c, queue.WorkerConfig{Queue: "q", Concurrency: 4, BatchSize: 4, Lease: 600 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond, PollInterval: time.Hour, TestSignals: signals}, func(ctx context.Context, j *queue.Job) error {
		ran <- j
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := w.Run(wctx); err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	// Once the worker's first claim (which finds nothing) is over, all its room is free.
	var r *queue.Reservation
	testwait.Until(t, "a reservation of all 4 jobs", func() bool {
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
		if err := c.NewTx().EnqueueHeld(r, ps); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("%s: err %v; want ErrInvalid", name, err)
		}
	}
	// A once key used before: that job is skipped, and its room given back with Hand.
	if _, err := c.EnqueueMany(ctx, []queue.EnqueueParams{{Queue: "other", Kind: "k", ParentID: 9, OnceKey: "used"}}); err != nil {
		t.Fatal(err)
	}
	tx := c.NewTx()
	if err := tx.EnqueueHeld(r, []queue.EnqueueParams{{Queue: "q", Kind: "k", Args: []byte(`{"n":1}`)}, {Queue: "q", Kind: "k", ParentID: 9, OnceKey: "used"},
		{Queue: "q", Kind: "k2", Priority: 7, MaxAttempts: 3, ParentID: 9, OnceKey: "new"}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Send(ctx); err != nil { // hands the jobs to the worker
		t.Fatal(err)
	}
	if len(r.Jobs()) != 2 {
		t.Fatalf("inserted %d held jobs, want 2 (one once key was used)", len(r.Jobs()))
	}
	// The insert answers with ids, positions and the start only; the rest of each handed job is
	// filled in from what was sent, and must be what the database has (the skipped job in the
	// middle shifts the second one's position).
	for i, want := range []struct {
		kind, args                string
		prio, maxAttempts, parent int
	}{{"k", `{"n": 1}`, 0, queue.DefaultMaxAttempts, 0}, {"k2", `{}`, 7, 3, 9}} {
		h := r.Jobs()[i]
		db, err := c.Get(ctx, h.ID)
		if err != nil {
			t.Fatal(err)
		}
		if h.Kind != want.kind || h.Priority != want.prio || h.MaxAttempts != want.maxAttempts || int(h.ParentID) != want.parent ||
			h.Queue != "q" || h.State != queue.StateRunning || h.Attempt != 1 || h.LeaseToken == 0 || h.LeaseUntil == nil ||
			!h.LeaseUntil.Equal(h.RunAt.Add(600*time.Millisecond)) || h.StartedAt == nil || !h.StartedAt.Equal(h.RunAt) {
			t.Errorf("handed job %d: %+v; want kind %s, priority %d, max attempts %d, parent %d, running on attempt 1 under a 600ms lease from its start",
				i, h, want.kind, want.prio, want.maxAttempts, want.parent)
		}
		if db.Kind != h.Kind || db.Priority != h.Priority || db.MaxAttempts != h.MaxAttempts || db.ParentID != h.ParentID ||
			db.Queue != h.Queue || !db.RunAt.Equal(h.RunAt) || !db.CreatedAt.Equal(h.CreatedAt) || db.StartedAt == nil ||
			!db.StartedAt.Equal(*h.StartedAt) || string(db.Args) != want.args || db.Attempt != 1 {
			t.Errorf("handed job %d: %+v; the database has %+v", i, h, db)
		}
	}
	got := map[int64]bool{}
	for range 2 {
		select {
		case j := <-ran:
			if j.Attempt != 1 || j.LeaseToken == 0 {
				t.Fatalf("handed job %+v", j)
			}
			got[j.ID] = true
		case <-time.After(30 * time.Second):
			t.Fatal("handed jobs did not run")
		}
	}
	for range 2 {
		if o := signals.Outcome.Wait(t); o.What != queue.OutcomeCompleted || !got[o.Job] {
			t.Fatalf("outcome %+v; want a handed job completed", o)
		}
	}
	if s := stats(t, c); s.Running != 0 || s.Available != 0 || w.Stats().Lost != 0 || w.Stats().Claimed != 2 {
		t.Fatalf("stats %+v, worker %+v; want 2 succeeded, none lost", s, w.Stats())
	}

	// Handed to a stopped worker: released for others, attempt not counted. The handlers' room
	// is taken while the claim loop claims (it wakes when they finish), so wait for that claim.
	testwait.Until(t, "r != nil", func() bool { r = w.Reserve(1); return r != nil })
	stop()
	<-stopped
	tx = c.NewTx()
	if err := tx.EnqueueHeld(r, []queue.EnqueueParams{{Queue: "q", Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Send(ctx); err != nil {
		t.Fatal(err)
	}
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
