package queue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/queue"
)

// actualCounts counts job rows per queue and state, the slow way stats avoid.
func actualCounts(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT queue, state::text, count(*) FROM crawlq_job GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var q, s string
		var n int64
		if err := rows.Scan(&q, &s, &n); err != nil {
			t.Fatal(err)
		}
		out[q+"/"+s] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func statCounts(t *testing.T, c *queue.Client) map[string]int64 {
	t.Helper()
	st, err := c.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, s := range st {
		for state, n := range map[string]int64{"available": s.Available, "scheduled": s.Scheduled, "running": s.Running,
			"succeeded": s.Succeeded, "cancelled": s.Cancelled, "dead": s.Dead} {
			if n != 0 {
				out[s.Queue+"/"+state] = n
			}
		}
	}
	return out
}

// Every statement that changes a job's state keeps the counts exact: after a mix of all of them,
// the counts stats report equal the rows.
func TestCountsMatchRows(t *testing.T) {
	t.Parallel()
	c, pool, clk := newClockClient(t)
	ctx := ctxT(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string) {
		t.Helper()
		// Stats count due-but-unpromoted jobs as available; promote them so the rows agree.
		if _, err := c.Promote(context.Background(), 1000); err != nil {
			t.Fatal(err)
		}
		got, want := statCounts(t, c), actualCounts(t, pool)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("after %s: stats %v, rows %v", step, got, want)
		}
	}
	// COPY path (64+ plain jobs), the unnest path, delays, unique keys in every mode.
	var plain []queue.EnqueueParams
	for i := range 100 {
		plain = append(plain, queue.EnqueueParams{Queue: "q", Kind: "k", Args: []byte(fmt.Sprintf(`{"i":%d}`, i))})
	}
	if _, err := c.EnqueueMany(ctx, plain); err != nil {
		t.Fatal(err)
	}
	enqueue(t, c, queue.EnqueueParams{Queue: "other", Delay: time.Hour})
	enqueue(t, c, queue.EnqueueParams{UniqueKey: "u", Delay: time.Hour})
	enqueue(t, c, queue.EnqueueParams{UniqueKey: "u", OnDuplicate: queue.Replace})                   // scheduled -> available
	enqueue(t, c, queue.EnqueueParams{UniqueKey: "u", Delay: time.Hour, OnDuplicate: queue.Replace}) // available -> scheduled
	enqueue(t, c, queue.EnqueueParams{UniqueKey: "u", OnDuplicate: queue.Earliest})                  // scheduled -> available
	enqueue(t, c, queue.EnqueueParams{UniqueKey: "u"})                                               // keep
	tx, err := pool.Begin(ctx)
	must(err)
	_, err = c.EnqueueManyTx(ctx, tx, plain[:70]) // inside a caller's transaction, rolled back
	must(err)
	must(tx.Rollback(ctx))
	check("enqueue")

	jobs := claim(t, c, 40, time.Minute)
	must(c.Complete(ctx, jobs[0].Lease()))
	if lost, err := c.CompleteMany(ctx, []queue.Lease{jobs[1].Lease(), jobs[2].Lease(), {ID: jobs[3].ID, Token: 1}}); err != nil || len(lost) != 1 {
		t.Fatalf("complete many: lost %v, %v; want job %d lost", lost, err, jobs[3].ID)
	}
	for _, f := range []struct {
		j    *queue.Job
		msg  string
		opts queue.FailOptions
	}{{jobs[4], "retry", queue.FailOptions{}}, {jobs[5], "retry now", queue.FailOptions{RetryIn: time.Nanosecond}},
		{jobs[6], "dead", queue.FailOptions{Dead: true}}} {
		_, err := c.Fail(ctx, f.j, errors.New(f.msg), f.opts)
		must(err)
	}
	must(c.Snooze(ctx, jobs[7].Lease(), time.Hour))
	_, err = c.Release(ctx, []queue.Lease{jobs[8].Lease(), jobs[9].Lease()})
	must(err)
	if st, err := c.Cancel(ctx, jobs[10].ID); err != nil || st != queue.StateRunning { // running: marked
		t.Fatalf("cancel running: %s %v", st, err)
	}
	_, err = c.Fail(ctx, jobs[10], errors.New("cancelled"), queue.FailOptions{})
	must(err)
	if _, err := c.Cancel(ctx, plain[0].ParentID+jobs[39].ID+1000); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
	check("claim, complete, fail, snooze, release, cancel")

	clk.Advance(2 * time.Minute) // past the leases of the jobs still running
	if n, err := c.Rescue(ctx, 100); err != nil || n == 0 {
		t.Fatalf("rescue: %d %v", n, err)
	}
	check("rescue")

	if ids, err := c.Redrive(ctx, "q", nil, 10); err != nil || len(ids) == 0 {
		t.Fatalf("redrive: %v %v", ids, err)
	}
	check("redrive")

	parent := enqueue(t, c, queue.EnqueueParams{Queue: "kids", ParentID: 7})
	enqueue(t, c, queue.EnqueueParams{Queue: "kids", ParentID: 7, Delay: time.Hour})
	if k, err := c.Claim(ctx, queue.ClaimParams{Queue: "kids", Limit: 1}); err != nil || len(k) != 1 || k[0].ID != parent.ID {
		t.Fatalf("claim kids: %v %v", k, err)
	}
	if n, err := c.CancelParentTx(ctx, pool, 7); err != nil || n != 2 {
		t.Fatalf("cancel parent: %d %v", n, err)
	}
	check("cancel parent")

	_, err = pool.Exec(ctx, `UPDATE crawlq_job SET finished_at = $1::timestamptz - interval '2 days' WHERE state IN ('succeeded', 'cancelled', 'dead')`, clk.Now())
	must(err)
	if n, err := c.Retention(ctx, queue.RetentionParams{MaxAge: 24 * time.Hour}); err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	check("retention")

	// A delayed job that comes due is counted available by stats before and after promotion.
	enqueue(t, c, queue.EnqueueParams{Delay: time.Minute})
	clk.Advance(time.Minute)
	if n, err := c.Promote(ctx, 100); err != nil || n == 0 {
		t.Fatalf("nothing promoted: %v", err)
	}
	check("promote")

	// Rows changed behind the queue's back are repaired by Recount.
	_, err = pool.Exec(ctx, `DELETE FROM crawlq_job WHERE queue = 'other'`)
	must(err)
	if err := c.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	check("recount")
}

// A job's life writes as few count-change rows as its changes need: running jobs are counted from
// their rows, so a claim records only the available jobs it took, and a completion only the
// succeeded ones (a job claimed and completed wrote five rows before migration 0018: +available,
// -available, +running, -running, +succeeded). Stats still count the running job.
func TestRunningJobsWriteNoCountRows(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	ctx := ctxT(t)
	deltas := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM crawlq_job_count_delta`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	enqueue(t, c, queue.EnqueueParams{Queue: "q", Kind: "k"})
	jobs := claim(t, c, 1, time.Minute)
	if got := statCounts(t, c); got["q/running"] != 1 || got["q/available"] != 0 {
		t.Fatalf("stats with the job running: %v", got)
	}
	before := deltas() // the stats above folded the deltas
	if err := c.Complete(ctx, jobs[0].Lease()); err != nil {
		t.Fatal(err)
	}
	if n := deltas() - before; n != 1 {
		t.Fatalf("the completion wrote %d count-change rows, want 1 (+succeeded)", n)
	}
	enqueue(t, c, queue.EnqueueParams{Queue: "q", Kind: "k"})
	before = deltas()
	claim(t, c, 1, time.Minute)
	if n := deltas() - before; n != 1 {
		t.Fatalf("the claim wrote %d count-change rows, want 1 (-available)", n)
	}
	if got, want := statCounts(t, c), actualCounts(t, pool); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stats %v, rows %v", got, want)
	}
}
