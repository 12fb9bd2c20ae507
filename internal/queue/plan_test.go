package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/queue"
)

// The hot statements are PL/pgSQL functions whose plans are made once per session, on whatever
// the statistics said then, and kept (migration 0010). A plan made while crawlq_job was empty must
// still find each lease by key once the table holds thousands of running jobs: no sequential
// scan, and no walk of the running jobs' index for every lease (both were seen with auto_explain
// before the functions pinned them). The session here makes its plan on the empty table, then
// completes 100 of 3,000 running jobs, and the table's counters for that transaction
// (pg_stat_xact_user_tables) say how the rows were found. The same is run with the function's
// enable_seqscan setting removed, to show the check sees the difference: its plan is still the
// generic one made on the empty table. (Removing both settings left the session to make custom
// plans from each call's values and the table's size at that moment; under make test's load the
// control once got a plan that found the leases by key, likely one of those, and failed.)
func TestCompletionPlanMadeOnAnEmptyTableFindsLeasesByKey(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	ctx := ctxT(t)

	run := func(t *testing.T, pinned bool) (seqScans, fetched int64) {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if !pinned {
			// The function without the SET clause that keeps its generic plan off sequential scans.
			if _, err := conn.Exec(ctx, `ALTER FUNCTION crawlq_complete_jobs(bigint[], bigint[], timestamptz) RESET enable_seqscan`); err != nil {
				t.Fatal(err)
			}
			defer pool.Exec(context.WithoutCancel(ctx), `ALTER FUNCTION crawlq_complete_jobs(bigint[], bigint[], timestamptz)
				SET plan_cache_mode = force_generic_plan SET enable_seqscan = off`)
		}
		truncate(t, pool)
		// Statistics that say so: an autovacuum ANALYZE of the table's last contents (the schema
		// is reused from an earlier test) between the truncate and the first call would otherwise
		// let that call plan for a full table, and the unpinned case below find leases by key.
		if _, err := conn.Exec(ctx, `ANALYZE crawlq_job`); err != nil {
			t.Fatal(err)
		}
		// The first call plans on the empty table, and the session keeps that plan.
		if _, err := conn.Exec(ctx, `SELECT count(*) FROM crawlq_complete_jobs('{1}', '{1}', NULL)`); err != nil {
			t.Fatal(err)
		}
		jobs := runningJobs(t, c, 3000)
		ids, tokens := make([]int64, 0, 100), make([]int64, 0, 100)
		for _, j := range jobs[1000:1100] {
			ids, tokens = append(ids, j.ID), append(tokens, j.LeaseToken)
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		var done int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM crawlq_complete_jobs($1, $2, NULL)`, ids, tokens).Scan(&done); err != nil {
			t.Fatal(err)
		}
		if done != len(ids) {
			t.Fatalf("completed %d of %d held leases", done, len(ids))
		}
		if err := tx.QueryRow(ctx, `SELECT seq_scan, idx_tup_fetch FROM pg_stat_xact_user_tables
			WHERE relid = 'crawlq_job'::regclass`).Scan(&seqScans, &fetched); err != nil {
			t.Fatal(err)
		}
		return seqScans, fetched
	}

	t.Run("shipped", func(t *testing.T) {
		seq, fetched := run(t, true)
		t.Logf("seq scans %d, rows fetched by index %d, for 100 leases among 3000 running jobs", seq, fetched)
		if seq != 0 || fetched > 300 {
			t.Fatalf("completing 100 leases: %d sequential scans and %d rows fetched by index; want none, and a few per lease", seq, fetched)
		}
	})
	t.Run("unpinned", func(t *testing.T) {
		seq, fetched := run(t, false)
		t.Logf("seq scans %d, rows fetched by index %d, without the plan settings", seq, fetched)
		if seq == 0 && fetched <= 300 {
			t.Fatalf("without its plan settings the completion still found leases by key (%d rows fetched): the check above proves nothing", fetched)
		}
	})
}

// runningJobs enqueues n jobs on queue q and claims them all.
func runningJobs(t *testing.T, c *queue.Client, n int) []*queue.Job {
	t.Helper()
	ps := make([]queue.EnqueueParams, n)
	for i := range ps {
		ps[i] = queue.EnqueueParams{Queue: "q", Kind: "noop"}
	}
	if _, err := c.EnqueueMany(ctxT(t), ps); err != nil {
		t.Fatal(err)
	}
	jobs := claim(t, c, n, time.Hour)
	if len(jobs) != n {
		t.Fatalf("claimed %d of %d", len(jobs), n)
	}
	return jobs
}

// truncate empties the job tables of the test's schema.
func truncate(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(ctxT(t), `TRUNCATE crawlq_job, crawlq_job_count, crawlq_job_count_delta`); err != nil {
		t.Fatal(err)
	}
}
