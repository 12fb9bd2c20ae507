package maintain_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/dbtest"
	"crawlq/internal/maintain"
	"crawlq/internal/queue"
)

// What retention costs per finished job: deleting in the batches maintenance uses (and the
// VACUUM that makes the space reusable), against dropping a partition that holds the same rows
// with the same indexes. It reports rows/s and WAL bytes per row; docs/operations.md quotes a run.
//
//	go test -run XXX -bench Retention -benchtime 3x ./internal/maintain
func BenchmarkRetention(b *testing.B) {
	const rows = 200_000
	pool := dbtest.Pool(b)
	ctx := context.Background()
	fill := func(table string) {
		b.Helper()
		_, err := pool.Exec(ctx, `INSERT INTO `+table+` (queue, kind, state, args, parent_id, created_at, finished_at, attempt)
SELECT 'crawl', 'page', 'succeeded', jsonb_build_object('url', 'http://example.com/p/' || g, 'depth', 3), 1,
       now() - interval '3 days', now() - interval '2 days', 1
FROM generate_series(1, $1) g`, rows)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `VACUUM ANALYZE `+table); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("delete_batches", func(b *testing.B) {
		q := queue.New(pool, queue.Config{})
		var took, vacuum time.Duration
		var wal, vwal int64
		for range b.N {
			b.StopTimer()
			fill("crawlq_job")
			b.StartTimer()
			lsn := lsnNow(b, pool)
			start := time.Now()
			n := 0
			for {
				k, err := q.PurgeFinished(ctx, "crawl", queue.Cutoffs{Succeeded: time.Now().Add(-24 * time.Hour)}, 2000)
				if err != nil {
					b.Fatal(err)
				}
				n += k
				if k < 2000 {
					break
				}
			}
			if n != rows {
				b.Fatalf("deleted %d, want %d", n, rows)
			}
			took += time.Since(start)
			wal += walSince(b, pool, lsn)
			lsn = lsnNow(b, pool)
			start = time.Now()
			if _, err := pool.Exec(ctx, `VACUUM crawlq_job`); err != nil {
				b.Fatal(err)
			}
			vacuum += time.Since(start)
			vwal += walSince(b, pool, lsn)
		}
		total := float64(b.N * rows)
		b.ReportMetric(total/took.Seconds(), "rows/s")
		b.ReportMetric(float64(wal)/total, "WAL-B/row")
		b.ReportMetric(total/vacuum.Seconds(), "vacuumed-rows/s")
		b.ReportMetric(float64(vwal)/total, "vacuum-WAL-B/row")
	})
	b.Run("delete_once_keys", func(b *testing.B) {
		q := queue.New(pool, queue.Config{})
		var took time.Duration
		var wal int64
		for range b.N {
			b.StopTimer()
			_, err := pool.Exec(ctx, `INSERT INTO crawlq_job_once (parent_id, h)
SELECT 7, md5('http://example.com/p/' || g)::uuid FROM generate_series(1, $1) g`, rows)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			lsn := lsnNow(b, pool)
			start := time.Now()
			n := 0
			var after [16]byte
			for {
				k, last, err := q.DeleteOnceKeys(ctx, 7, after, 2000)
				after = last
				if err != nil {
					b.Fatal(err)
				}
				n += k
				if k < 2000 {
					break
				}
			}
			if n != rows {
				b.Fatalf("deleted %d, want %d", n, rows)
			}
			took += time.Since(start)
			wal += walSince(b, pool, lsn)
		}
		total := float64(b.N * rows)
		b.ReportMetric(total/took.Seconds(), "rows/s")
		b.ReportMetric(float64(wal)/total, "WAL-B/row")
	})
	b.Run("drop_partition", func(b *testing.B) {
		// The same columns and indexes as crawlq_job, partitioned by finished_at (a day each).
		_, err := pool.Exec(ctx, `
DROP TABLE IF EXISTS pjob;
CREATE TABLE pjob (LIKE crawlq_job INCLUDING DEFAULTS INCLUDING IDENTITY) PARTITION BY RANGE (finished_at);
CREATE INDEX ON pjob (queue, priority DESC, run_at, id) WHERE state = 'available';
CREATE INDEX ON pjob (lease_until) WHERE state = 'running';
CREATE INDEX ON pjob (parent_id) WHERE state IN ('available', 'scheduled', 'running');
CREATE INDEX ON pjob (queue, finished_at) WHERE state IN ('succeeded', 'cancelled', 'dead');
CREATE INDEX ON pjob (id)`)
		if err != nil {
			b.Fatal(err)
		}
		var took time.Duration
		var wal int64
		for range b.N {
			b.StopTimer()
			if _, err := pool.Exec(ctx, `CREATE TABLE pjob_day PARTITION OF pjob FOR VALUES FROM (now() - interval '3 days') TO (now() - interval '1 day')`); err != nil {
				b.Fatal(err)
			}
			fill("pjob")
			b.StartTimer()
			lsn := lsnNow(b, pool)
			start := time.Now()
			if _, err := pool.Exec(ctx, `DROP TABLE pjob_day`); err != nil {
				b.Fatal(err)
			}
			took += time.Since(start)
			wal += walSince(b, pool, lsn)
		}
		total := float64(b.N * rows)
		b.ReportMetric(total/took.Seconds(), "rows/s")
		b.ReportMetric(float64(wal)/total, "WAL-B/row")
	})
}

func lsnNow(b *testing.B, pool *pgxpool.Pool) string {
	b.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&s); err != nil {
		b.Fatal(err)
	}
	return s
}

func walSince(b *testing.B, pool *pgxpool.Pool, lsn string) int64 {
	b.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, lsn).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// Claims and completions with and without a maintenance pass deleting finished jobs at the same
// time (a deep backlog of them, 2 days old): the pass must not slow the hot path measurably.
// Passes run back to back until the backlog is gone (about as long as 2000 claims take here);
// "deleted" says how much they deleted while the claims ran.
//
//	go test -run XXX -bench ClaimDuringMaintenance -benchtime 2000x ./internal/maintain
func BenchmarkClaimDuringMaintenance(b *testing.B) {
	for _, busy := range []bool{false, true} {
		name := "idle"
		if busy {
			name = "maintaining"
		}
		b.Run(name, func(b *testing.B) {
			pool := dbtest.Pool(b)
			ctx := context.Background()
			q := queue.New(pool, queue.Config{})
			_, err := pool.Exec(ctx, `INSERT INTO crawlq_job (queue, kind, state, args, created_at, finished_at, attempt)
SELECT 'crawl', 'page', 'succeeded', '{}', now() - interval '3 days', now() - interval '2 days', 1
FROM generate_series(1, 300000)`)
			if err != nil {
				b.Fatal(err)
			}
			// The rows above bypassed the queue's counts, which the deletes below decrement.
			if err := q.Recount(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `VACUUM ANALYZE crawlq_job`); err != nil {
				b.Fatal(err)
			}
			ps := make([]queue.EnqueueParams, b.N*10)
			for i := range ps {
				ps[i] = queue.EnqueueParams{Queue: "work", Kind: "noop"}
			}
			if _, err := q.EnqueueMany(ctx, ps); err != nil {
				b.Fatal(err)
			}
			stop := make(chan struct{})
			done := make(chan int)
			if busy {
				svc, err := maintain.New(q, nil, maintain.Config{Batch: 2000})
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					deleted := 0
					defer func() { done <- deleted }()
					for {
						select {
						case <-stop:
							return
						default:
						}
						// Let every pass lead: this measures passes back to back, not the lease.
						if _, err := pool.Exec(ctx, `DELETE FROM crawlq_leader`); err != nil {
							b.Error(err)
							return
						}
						res, err := svc.RunOnce(ctx, time.Now())
						if err != nil {
							b.Error(err)
							return
						}
						deleted += res.Jobs
						if res.Jobs == 0 {
							return // the backlog is gone: empty passes back to back would measure a busy loop
						}
					}
				}()
			}
			b.ResetTimer()
			for range b.N {
				jobs, err := q.Claim(ctx, queue.ClaimParams{Queue: "work", Worker: "b", Limit: 10, Lease: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				ls := make([]queue.Lease, len(jobs))
				for i, j := range jobs {
					ls[i] = j.Lease()
				}
				if _, err := q.CompleteMany(ctx, ls); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			close(stop)
			if busy {
				b.ReportMetric(float64(<-done), "deleted")
			}
		})
	}
}
