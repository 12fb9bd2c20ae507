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
		rows.Scan(&q, &s, &n)
		out[q+"/"+s] = n
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
	c, pool := newClient(t)
	ctx := ctxT(t)
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
	tx, _ := pool.Begin(ctx)
	c.EnqueueManyTx(ctx, tx, plain[:70]) // COPY inside a caller's transaction, rolled back
	tx.Rollback(ctx)
	check("enqueue")

	jobs := claim(t, c, 40, 100*time.Millisecond)
	c.Complete(ctx, jobs[0].Lease())
	c.CompleteMany(ctx, []queue.Lease{jobs[1].Lease(), jobs[2].Lease(), {ID: jobs[3].ID, Token: 1}})
	c.Fail(ctx, jobs[4], errors.New("retry"), queue.FailOptions{})
	c.Fail(ctx, jobs[5], errors.New("retry now"), queue.FailOptions{RetryIn: time.Nanosecond})
	c.Fail(ctx, jobs[6], errors.New("dead"), queue.FailOptions{Dead: true})
	c.Snooze(ctx, jobs[7].Lease(), time.Hour)
	c.Release(ctx, []queue.Lease{jobs[8].Lease(), jobs[9].Lease()})
	c.Cancel(ctx, jobs[10].ID) // running: marked
	c.Fail(ctx, jobs[10], errors.New("cancelled"), queue.FailOptions{})
	c.Cancel(ctx, plain[0].ParentID+jobs[39].ID+1000) // unknown
	check("claim, complete, fail, snooze, release, cancel")

	time.Sleep(150 * time.Millisecond)
	if n, err := c.Rescue(ctx, 100); err != nil || n == 0 {
		t.Fatalf("rescue: %d %v", n, err)
	}
	check("rescue")

	c.Redrive(ctx, "q", nil, 10)
	check("redrive")

	parent := enqueue(t, c, queue.EnqueueParams{Queue: "kids", ParentID: 7})
	enqueue(t, c, queue.EnqueueParams{Queue: "kids", ParentID: 7, Delay: time.Hour})
	if k, _ := c.Claim(ctx, queue.ClaimParams{Queue: "kids", Limit: 1}); len(k) != 1 || k[0].ID != parent.ID {
		t.Fatal("claim kids")
	}
	c.CancelParentTx(ctx, pool, 7)
	check("cancel parent")

	pool.Exec(ctx, `UPDATE crawlq_job SET finished_at = now() - interval '2 days' WHERE state IN ('succeeded', 'cancelled', 'dead')`)
	if n, err := c.Retention(ctx, queue.RetentionParams{MaxAge: 24 * time.Hour}); err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	check("retention")

	// A delayed job that comes due is counted available by stats before and after promotion.
	enqueue(t, c, queue.EnqueueParams{Delay: 50 * time.Millisecond})
	time.Sleep(100 * time.Millisecond)
	if n, _ := c.Promote(ctx, 100); n == 0 {
		t.Fatal("nothing promoted")
	}
	check("promote")

	// Rows changed behind the queue's back are repaired by Recount.
	pool.Exec(ctx, `DELETE FROM crawlq_job WHERE queue = 'other'`)
	if err := c.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	check("recount")
}
