package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/clock"
	"crawlq/internal/dbtest"
	"crawlq/internal/queue"
	"crawlq/internal/testwait"
)

func newClient(t *testing.T) (*queue.Client, *pgxpool.Pool) {
	t.Helper()
	pool := dbtest.Pool(t)
	return queue.New(pool, queue.Config{RetryBase: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond}), pool
}

// newClockClient is newClient with a clock of the test's own, starting at the present and
// standing still until the test moves it.
func newClockClient(t *testing.T) (*queue.Client, *pgxpool.Pool, *clock.Stopped) {
	t.Helper()
	pool := dbtest.Pool(t)
	clk := clock.NewStopped(time.Now().Truncate(time.Microsecond))
	return queue.New(pool, queue.Config{RetryBase: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond, Clock: clk}), pool, clk
}

// get reads a job, failing the test on an error.
func get(t *testing.T, c *queue.Client, id int64) *queue.Job {
	t.Helper()
	j, err := c.Get(ctxT(t), id)
	if err != nil {
		t.Fatalf("get job %d: %v", id, err)
	}
	return j
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func enqueue(t *testing.T, c *queue.Client, p queue.EnqueueParams) queue.EnqueueResult {
	t.Helper()
	if p.Queue == "" {
		p.Queue = "q"
	}
	if p.Kind == "" {
		p.Kind = "noop"
	}
	r, err := c.Enqueue(ctxT(t), p)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return r
}

func claim(t *testing.T, c *queue.Client, n int, lease time.Duration) []*queue.Job {
	t.Helper()
	jobs, err := c.Claim(ctxT(t), queue.ClaimParams{Queue: "q", Worker: "t", Limit: n, Lease: lease})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return jobs
}

func TestPriorityThenRunAtOrder(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t)
	low := enqueue(t, c, queue.EnqueueParams{Priority: -5})
	mid1 := enqueue(t, c, queue.EnqueueParams{})
	high := enqueue(t, c, queue.EnqueueParams{Priority: 10})
	mid2 := enqueue(t, c, queue.EnqueueParams{})
	jobs := claim(t, c, 10, time.Minute)
	var got []int64
	for _, j := range jobs {
		got = append(got, j.ID)
	}
	want := []int64{high.ID, mid1.ID, mid2.ID, low.ID}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("claim order %v, want %v", got, want)
	}
	for _, j := range jobs {
		if j.Attempt != 1 || j.LeaseToken == 0 || j.State != queue.StateRunning {
			t.Fatalf("claimed job %+v: want attempt 1, a token, running", j)
		}
	}
}

func TestDelayedJobRunsWhenDue(t *testing.T) {
	t.Parallel()
	c, _, clk := newClockClient(t)
	r := enqueue(t, c, queue.EnqueueParams{Delay: time.Minute})
	j, err := c.Get(ctxT(t), r.ID)
	if err != nil || j.State != queue.StateScheduled {
		t.Fatalf("delayed job: %v %+v, want scheduled", err, j)
	}
	if n, err := c.Promote(ctxT(t), 10); err != nil || n != 0 || len(claim(t, c, 1, time.Minute)) != 0 {
		t.Fatalf("a delayed job was claimable before its time (promote: %d, %v)", n, err)
	}
	st := stats(t, c)
	if st.Scheduled != 1 || st.Available != 0 || st.PastDue != 0 {
		t.Fatalf("stats before due: %+v", st)
	}
	clk.Advance(time.Minute + time.Second)
	st = stats(t, c)
	if st.PastDue != 1 || st.Available != 1 || st.Scheduled != 0 || st.OldestPastDue <= 0 {
		t.Fatalf("stats once due: %+v", st)
	}
	if n, err := c.Promote(ctxT(t), 10); err != nil || n != 1 {
		t.Fatalf("promote: %d %v", n, err)
	}
	if jobs := claim(t, c, 1, time.Minute); len(jobs) != 1 || jobs[0].ID != r.ID {
		t.Fatalf("claim after due: %v", jobs)
	}
	// An absolute run_at in the past is due at once.
	r2 := enqueue(t, c, queue.EnqueueParams{RunAt: time.Now().Add(-time.Hour)})
	if j := get(t, c, r2.ID); j.State != queue.StateAvailable {
		t.Fatalf("past run_at: state %s", j.State)
	}
}

func stats(t *testing.T, c *queue.Client) queue.QueueStats {
	t.Helper()
	all, err := c.Stats(ctxT(t))
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	for _, s := range all {
		if s.Queue == "q" {
			return s
		}
	}
	return queue.QueueStats{Queue: "q"}
}

func TestRetryBackoffDeadAndRedrive(t *testing.T) {
	t.Parallel()
	c, _, clk := newClockClient(t)
	r := enqueue(t, c, queue.EnqueueParams{MaxAttempts: 3})
	ctx := ctxT(t)
	var lastRunAt time.Time
	for attempt := 1; attempt <= 3; attempt++ {
		if attempt > 1 {
			if jobs := claim(t, c, 1, time.Minute); len(jobs) != 0 {
				t.Fatalf("attempt %d: claimed during the backoff: %v", attempt, jobs)
			}
			clk.Advance(time.Second) // past the backoff (at most RetryMax, 50ms)
			if n, err := c.Promote(ctx, 10); err != nil || n != 1 {
				t.Fatalf("attempt %d: promote: %d %v", attempt, n, err)
			}
		}
		jobs := claim(t, c, 1, time.Minute)
		if len(jobs) != 1 || jobs[0].Attempt != attempt {
			t.Fatalf("attempt %d: claimed %v", attempt, jobs)
		}
		st, err := c.Fail(ctx, jobs[0], fmt.Errorf("boom %d", attempt), queue.FailOptions{})
		if err != nil {
			t.Fatal(err)
		}
		j := get(t, c, r.ID)
		if attempt < 3 {
			if st != queue.StateScheduled || !j.RunAt.After(lastRunAt) {
				t.Fatalf("attempt %d: state %s run_at %v: want scheduled later", attempt, st, j.RunAt)
			}
			lastRunAt = j.RunAt
		} else if st != queue.StateDead || j.FinishedAt == nil {
			t.Fatalf("after last attempt: %s, want dead", st)
		}
		if len(j.Errors) != attempt || j.Errors[attempt-1].Error != fmt.Sprintf("boom %d", attempt) {
			t.Fatalf("error history %+v", j.Errors)
		}
	}
	if s := stats(t, c); s.Dead != 1 {
		t.Fatalf("stats dead %d, want 1", s.Dead)
	}
	ids, err := c.Redrive(ctx, "q", nil, 10)
	if err != nil || len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("redrive: %v %v", ids, err)
	}
	j := get(t, c, r.ID)
	if j.State != queue.StateAvailable || j.Attempt != 0 {
		t.Fatalf("redriven job %+v", j)
	}
	if jobs := claim(t, c, 1, time.Minute); len(jobs) != 1 {
		t.Fatal("redriven job not claimable")
	}
}

func TestBackoffGrowsWithJitter(t *testing.T) {
	t.Parallel()
	c := queue.New(nil, queue.Config{RetryBase: time.Second, RetryMax: time.Minute})
	for attempt, base := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 30: time.Minute} {
		seen := map[time.Duration]bool{}
		for range 50 {
			d := c.Backoff(attempt)
			if d < base/2 || d > base {
				t.Fatalf("attempt %d: backoff %s outside [%s, %s]", attempt, d, base/2, base)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Fatalf("attempt %d: backoff has no jitter: %v", attempt, seen)
		}
	}
}

func TestPermanentAndRetryIn(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t)
	enqueue(t, c, queue.EnqueueParams{})
	j := claim(t, c, 1, time.Minute)[0]
	st, err := c.Fail(ctxT(t), j, errors.New("bad"), queue.FailOptions{Dead: true})
	if err != nil || st != queue.StateDead {
		t.Fatalf("permanent fail: %s %v", st, err)
	}
	enqueue(t, c, queue.EnqueueParams{})
	j = claim(t, c, 1, time.Minute)[0]
	before := time.Now()
	if _, err := c.Fail(ctxT(t), j, errors.New("429"), queue.FailOptions{RetryIn: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, j.ID); got.RunAt.Before(before.Add(59 * time.Minute)) {
		t.Fatalf("RetryIn ignored: run_at %v", got.RunAt)
	}
}

// A worker that claims and vanishes: its job comes back after the lease, completes elsewhere,
// and the vanished worker's late writes change nothing.
func TestLeaseExpiryRescueAndFencing(t *testing.T) {
	t.Parallel()
	c, _, clk := newClockClient(t)
	ctx := ctxT(t)
	r := enqueue(t, c, queue.EnqueueParams{})
	stale := claim(t, c, 1, time.Minute)[0]
	clk.Advance(59 * time.Second)
	if n, err := c.Rescue(ctx, 10); err != nil || n != 0 {
		t.Fatalf("rescued a job whose lease is still valid: %d %v", n, err)
	}
	if len(claim(t, c, 1, time.Minute)) != 0 {
		t.Fatal("a leased job was claimed twice")
	}
	clk.Advance(2 * time.Second)
	if n, err := c.Rescue(ctx, 10); err != nil || n != 1 {
		t.Fatalf("rescue: %d %v", n, err)
	}
	fresh := claim(t, c, 1, time.Minute)
	if len(fresh) != 1 || fresh[0].ID != r.ID || fresh[0].LeaseToken == stale.LeaseToken || fresh[0].Attempt != 2 {
		t.Fatalf("reclaim: %+v", fresh)
	}
	for name, err := range map[string]error{
		"complete": c.Complete(ctx, stale.Lease()),
		"snooze":   c.Snooze(ctx, stale.Lease(), time.Second),
	} {
		if !errors.Is(err, queue.ErrLeaseLost) {
			t.Fatalf("stale %s: %v, want ErrLeaseLost", name, err)
		}
	}
	if _, err := c.Fail(ctx, stale, errors.New("late"), queue.FailOptions{}); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("stale fail: %v", err)
	}
	hb, err := c.Heartbeat(ctx, []queue.Lease{stale.Lease(), fresh[0].Lease()}, time.Minute)
	if err != nil || len(hb.Lost) != 1 || hb.Lost[0] != stale.ID {
		t.Fatalf("heartbeat: %+v %v", hb, err)
	}
	if lost, err := c.Release(ctx, []queue.Lease{stale.Lease()}); err != nil || len(lost) != 1 {
		t.Fatalf("stale release changed the job: %v %v", lost, err)
	}
	j := get(t, c, r.ID)
	if j.State != queue.StateRunning || j.LeaseToken != fresh[0].LeaseToken || len(j.Errors) != 1 {
		t.Fatalf("job after stale writes: %+v", j)
	}
	if err := c.Complete(ctx, fresh[0].Lease()); err != nil {
		t.Fatal(err)
	}
	if j := get(t, c, r.ID); j.State != queue.StateSucceeded {
		t.Fatalf("state %s", j.State)
	}
}

func TestRescueOutOfAttemptsIsDead(t *testing.T) {
	t.Parallel()
	c, _, clk := newClockClient(t)
	r := enqueue(t, c, queue.EnqueueParams{MaxAttempts: 1})
	claim(t, c, 1, time.Minute)
	clk.Advance(time.Minute + time.Second)
	if n, err := c.Rescue(ctxT(t), 10); err != nil || n != 1 {
		t.Fatalf("not rescued: %d %v", n, err)
	}
	if j := get(t, c, r.ID); j.State != queue.StateDead {
		t.Fatalf("state %s, want dead", j.State)
	}
}

func TestReleaseKeepsAttempt(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t)
	r := enqueue(t, c, queue.EnqueueParams{})
	j := claim(t, c, 1, time.Minute)[0]
	if lost, err := c.Release(ctxT(t), []queue.Lease{j.Lease()}); err != nil || len(lost) != 0 {
		t.Fatal(lost, err)
	}
	if got := get(t, c, r.ID); got.State != queue.StateAvailable || got.Attempt != 0 {
		t.Fatalf("released: %+v", got)
	}
}

func TestUniqueConcurrentEnqueue(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	var wg sync.WaitGroup
	ids := make(chan queue.EnqueueResult, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.Enqueue(context.Background(), queue.EnqueueParams{Queue: "q", Kind: "k", UniqueKey: "same", Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
			if err != nil {
				t.Error(err)
			}
			ids <- r
		}()
	}
	wg.Wait()
	close(ids)
	first, dups := int64(0), 0
	for r := range ids {
		if first == 0 {
			first = r.ID
		}
		if r.ID != first {
			t.Fatalf("two ids for one key: %d, %d", first, r.ID)
		}
		if r.Duplicate {
			dups++
		}
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM crawlq_job WHERE unique_key = 'same'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 || dups != 49 {
		t.Fatalf("%d jobs, %d duplicates; want 1 and 49", n, dups)
	}
}

func TestUniqueModes(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t)
	ctx := ctxT(t)
	at := func(id int64) (time.Time, int) {
		j, err := c.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return j.RunAt, j.Priority
	}
	base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	r := enqueue(t, c, queue.EnqueueParams{UniqueKey: "k", RunAt: base, Priority: 1})
	// keep: nothing moves.
	d := enqueue(t, c, queue.EnqueueParams{UniqueKey: "k", RunAt: base.Add(time.Hour), Priority: 5})
	if !d.Duplicate || d.ID != r.ID {
		t.Fatalf("keep: %+v", d)
	}
	if ra, p := at(r.ID); !ra.Equal(base) || p != 1 {
		t.Fatalf("keep moved the job: %v %d", ra, p)
	}
	// earliest: a later time does not move it, an earlier one does.
	enqueue(t, c, queue.EnqueueParams{UniqueKey: "k", RunAt: base.Add(time.Hour), OnDuplicate: queue.Earliest})
	if ra, _ := at(r.ID); !ra.Equal(base) {
		t.Fatalf("earliest moved to a later time: %v", ra)
	}
	enqueue(t, c, queue.EnqueueParams{UniqueKey: "k", RunAt: base.Add(-30 * time.Minute), OnDuplicate: queue.Earliest})
	if ra, _ := at(r.ID); !ra.Equal(base.Add(-30 * time.Minute)) {
		t.Fatalf("earliest: %v", ra)
	}
	// replace: run_at and priority move, later or not; to now makes it claimable.
	enqueue(t, c, queue.EnqueueParams{UniqueKey: "k", RunAt: base.Add(2 * time.Hour), Priority: 7, OnDuplicate: queue.Replace})
	if ra, p := at(r.ID); !ra.Equal(base.Add(2*time.Hour)) || p != 7 {
		t.Fatalf("replace: %v %d", ra, p)
	}
	enqueue(t, c, queue.EnqueueParams{UniqueKey: "k", OnDuplicate: queue.Replace})
	jobs := claim(t, c, 5, time.Minute)
	if len(jobs) != 1 || jobs[0].ID != r.ID {
		t.Fatalf("replace to now: claimed %v", jobs)
	}
	// Running: a duplicate leaves it alone; once finished the key is free again.
	if d := enqueue(t, c, queue.EnqueueParams{UniqueKey: "k", OnDuplicate: queue.Replace}); !d.Duplicate || d.ID != r.ID {
		t.Fatalf("duplicate of running job: %+v", d)
	}
	if err := c.Complete(ctx, jobs[0].Lease()); err != nil {
		t.Fatal(err)
	}
	if n := enqueue(t, c, queue.EnqueueParams{UniqueKey: "k"}); n.Duplicate || n.ID == r.ID {
		t.Fatalf("key not reusable after finish: %+v", n)
	}
	// In one batch, a repeated key yields one job.
	rs, err := c.EnqueueMany(ctx, []queue.EnqueueParams{
		{Queue: "q", Kind: "k", UniqueKey: "b"}, {Queue: "q", Kind: "k"}, {Queue: "q", Kind: "k", UniqueKey: "b"},
	})
	if err != nil || rs[0].ID != rs[2].ID || !rs[2].Duplicate || rs[0].Duplicate || rs[1].ID == rs[0].ID {
		t.Fatalf("batch: %+v %v", rs, err)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t)
	ctx := ctxT(t)
	waiting := enqueue(t, c, queue.EnqueueParams{Delay: time.Hour})
	if st, err := c.Cancel(ctx, waiting.ID); err != nil || st != queue.StateCancelled {
		t.Fatalf("cancel waiting: %s %v", st, err)
	}
	if _, err := c.Cancel(ctx, waiting.ID); !errors.Is(err, queue.ErrFinished) {
		t.Fatalf("cancel twice: %v", err)
	}
	if _, err := c.Cancel(ctx, 987654321); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
	// A running job: its worker learns at the next heartbeat; the handler's context ends with
	// ErrCancelRequested and the job ends cancelled.
	r := enqueue(t, c, queue.EnqueueParams{})
	started := make(chan struct{})
	cause := make(chan error, 1)
	signals := &queue.WorkerTestSignals{}
	signals.Outcome.Init()
	w, err := queue.NewWorker(c, queue.WorkerConfig{Queue: "q", Lease: 3 * time.Second, HeartbeatInterval: 100 * time.Millisecond, TestSignals: signals},
		func(ctx context.Context, j *queue.Job) error {
			close(started)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return ctx.Err()
		})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- w.Run(wctx) }()
	<-started
	if st, err := c.Cancel(ctx, r.ID); err != nil || st != queue.StateRunning {
		t.Fatalf("cancel running: %s %v", st, err)
	}
	select {
	case err := <-cause:
		if !errors.Is(err, queue.ErrCancelRequested) {
			t.Fatalf("handler cause %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("running job never learned of its cancellation")
	}
	if o := signals.Outcome.Wait(t); o.Job != r.ID || o.What != queue.OutcomeFailed || o.State != queue.StateCancelled {
		t.Fatalf("outcome %+v; want job %d failed into %s", o, r.ID, queue.StateCancelled)
	}
	if j := get(t, c, r.ID); j.State != queue.StateCancelled {
		t.Fatalf("job %d is %s; want %s", r.ID, j.State, queue.StateCancelled)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRetention(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	ctx := ctxT(t)
	var ps []queue.EnqueueParams
	for range 30 {
		ps = append(ps, queue.EnqueueParams{Queue: "q", Kind: "k"})
	}
	if _, err := c.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	jobs := claim(t, c, 20, time.Minute)
	var leases []queue.Lease
	for _, j := range jobs {
		leases = append(leases, j.Lease())
	}
	if lost, err := c.CompleteMany(ctx, leases); err != nil || lost != nil {
		t.Fatal(lost, err)
	}
	// Age the first 5 completions by a day.
	if _, err := pool.Exec(ctx, `UPDATE crawlq_job SET finished_at = now() - interval '1 day' WHERE id = ANY($1)`, []int64{jobs[0].ID, jobs[1].ID, jobs[2].ID, jobs[3].ID, jobs[4].ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Retention(ctx, queue.RetentionParams{}); !errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("retention without limits: %v", err)
	}
	n, err := c.Retention(ctx, queue.RetentionParams{MaxAge: time.Hour, BatchSize: 2})
	if err != nil || n != 5 {
		t.Fatalf("retention by age deleted %d (%v), want 5", n, err)
	}
	n, err = c.Retention(ctx, queue.RetentionParams{KeepPerQueue: 4, BatchSize: 3})
	if err != nil || n != 11 {
		t.Fatalf("retention by count deleted %d (%v), want 11", n, err)
	}
	s := stats(t, c)
	if s.Succeeded != 4 || s.Available != 10 {
		t.Fatalf("stats after retention: %+v", s)
	}
}

func TestStatsCounts(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t)
	ctx := ctxT(t)
	for range 5 {
		enqueue(t, c, queue.EnqueueParams{})
	}
	enqueue(t, c, queue.EnqueueParams{Delay: time.Hour})
	enqueue(t, c, queue.EnqueueParams{Queue: "other"})
	jobs := claim(t, c, 3, time.Minute)
	if err := c.Complete(ctx, jobs[0].Lease()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fail(ctx, jobs[1], errors.New("x"), queue.FailOptions{Dead: true}); err != nil {
		t.Fatal(err)
	}
	s := stats(t, c)
	want := queue.QueueStats{Queue: "q", Available: 2, Scheduled: 1, Running: 1, Succeeded: 1, Dead: 1, PastDue: 2}
	s.OldestPastDue = 0
	if s != want {
		t.Fatalf("stats %+v\nwant  %+v", s, want)
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	ctx := ctxT(t)
	big := json.RawMessage(`{"x":"` + strings.Repeat("a", queue.MaxArgsBytes) + `"}`)
	cases := map[string]queue.EnqueueParams{
		"queue format":   {Queue: "Bad Queue!", Kind: "k"},
		"empty queue":    {Kind: "k"},
		"empty kind":     {Queue: "q"},
		"negative delay": {Queue: "q", Kind: "k", Delay: -time.Second},
		"delay and at":   {Queue: "q", Kind: "k", Delay: time.Second, RunAt: time.Now()},
		"args size":      {Queue: "q", Kind: "k", Args: big},
		"invalid json":   {Queue: "q", Kind: "k", Args: json.RawMessage(`{"a":`)},
		"priority high":  {Queue: "q", Kind: "k", Priority: 1001},
		"priority low":   {Queue: "q", Kind: "k", Priority: -1001},
		"max attempts":   {Queue: "q", Kind: "k", MaxAttempts: -1},
		"unique key":     {Queue: "q", Kind: "k", UniqueKey: strings.Repeat("k", 513)},
		"dup mode":       {Queue: "q", Kind: "k", OnDuplicate: queue.DuplicateMode(9)},
	}
	for name, p := range cases {
		if _, err := c.Enqueue(ctx, p); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
	// One bad job in a batch rejects the batch.
	if _, err := c.EnqueueMany(ctx, []queue.EnqueueParams{{Queue: "q", Kind: "k"}, cases["priority high"]}); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("batch with a bad job: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM crawlq_job`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d jobs written by bad input", n)
	}
	if _, err := c.Claim(ctx, queue.ClaimParams{Queue: "q", Limit: 0}); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("claim limit 0: %v", err)
	}
	if _, err := queue.ParseDuplicateMode("sometimes"); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("dup mode: %v", err)
	}
}

// Many workers in this process and two more processes burn down 20,000 jobs: every job is
// worked exactly once and none is claimed twice while leased.
func TestManyWorkersExactlyOnce(t *testing.T) {
	t.Parallel()
	const n = 20000
	schema, url := dbtest.Schema(t)
	pool := dbtest.Open(t, url, 20)
	c := queue.New(pool, queue.Config{})
	ctx := ctxT(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE work_log (job_id bigint NOT NULL, attempt int NOT NULL, worker text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	ps := make([]queue.EnqueueParams, n)
	for i := range ps {
		ps[i] = queue.EnqueueParams{Queue: "q", Kind: "noop", Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
	}
	for i := 0; i < n; i += 5000 {
		if _, err := c.EnqueueMany(ctx, ps[i:i+5000]); err != nil {
			t.Fatal(err)
		}
	}
	var procs []*exec.Cmd
	for p := range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWorkerProcess$")
		cmd.Env = append(os.Environ(), "CRAWLQ_HELPER_URL="+url, fmt.Sprintf("CRAWLQ_HELPER_NAME=proc%d", p), "CRAWLQ_HELPER_SCHEMA="+schema)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for g := range 8 {
		w, err := queue.NewWorker(c, queue.WorkerConfig{Queue: "q", ID: fmt.Sprintf("g%d", g), Concurrency: 4, BatchSize: 50}, logWork(pool, fmt.Sprintf("g%d", g)))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(wctx); err != nil {
				t.Errorf("worker: %v", err)
			}
		}()
	}
	testwait.Until(t, "every job succeeded", func() bool {
		var done int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM crawlq_job WHERE state = 'succeeded'`).Scan(&done); err != nil {
			t.Fatal(err)
		}
		return done == n
	})
	stop()
	wg.Wait()
	for _, p := range procs {
		p.Process.Signal(os.Interrupt)
		p.Wait()
	}
	var runs, distinct, multi, procRuns int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT job_id) FROM work_log`).Scan(&runs, &distinct); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM crawlq_job WHERE attempt <> 1 OR state <> 'succeeded'`).Scan(&multi); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM work_log WHERE worker LIKE 'proc%'`).Scan(&procRuns); err != nil {
		t.Fatal(err)
	}
	if runs != n || distinct != n || multi != 0 {
		t.Fatalf("%d executions of %d distinct jobs, %d jobs with attempt != 1; want %d, %d, 0", runs, distinct, multi, n, n)
	}
	if procRuns == 0 {
		t.Fatal("the worker processes worked no job")
	}
	if s := stats(t, c); s.Succeeded != n || s.Running != 0 || s.Available != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func logWork(pool *pgxpool.Pool, name string) queue.Handler {
	return func(ctx context.Context, j *queue.Job) error {
		_, err := pool.Exec(ctx, `INSERT INTO work_log VALUES ($1, $2, $3)`, j.ID, j.Attempt, name)
		return err
	}
}

// TestHelperWorkerProcess is the body of the worker subprocesses of TestManyWorkersExactlyOnce.
func TestHelperWorkerProcess(t *testing.T) {
	url := os.Getenv("CRAWLQ_HELPER_URL")
	if url == "" {
		return // not a subprocess: nothing to do
	}
	pool := dbtest.Open(t, url, 8)
	c := queue.New(pool, queue.Config{})
	name := os.Getenv("CRAWLQ_HELPER_NAME")
	w, err := queue.NewWorker(c, queue.WorkerConfig{Queue: "q", ID: name, Concurrency: 4, BatchSize: 50}, logWork(pool, name))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signalContext()
	defer stop()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
}
