-- Every query on crawlq_job_count and crawlq_job_count_delta (internal/queue). The statements of
-- crawlq_job.sql that change jobs append their net change per (queue, state) to
-- crawlq_job_count_delta; these fold the deltas into the totals and read them, so stats never count
-- job rows, running jobs apart: those are counted from their rows (the partial index
-- crawlq_job_lease holds exactly them, and they are only what the live workers hold), so that a
-- job inserted running, or claimed, and then completed writes one delta row, not three (migration
-- 0018). The tables are in internal/migrate/migrations/0001_queue.sql.

-- name: RecordCopiedJobs :exec
-- Records the count change of a COPY of @n plain (available) jobs into @queue.
INSERT INTO crawlq_job_count_delta (queue, state, n) VALUES (sqlc.arg(queue)::text, 'available', sqlc.arg(n)::bigint);

-- name: FoldCounts :exec
-- Moves the per-statement count deltas into the totals. Concurrent folds are safe: a delta row is
-- deleted, and so counted, by one fold only; totals are updated in key order so two folds never
-- deadlock. A fold that finds another one running (its transaction-level advisory lock, one per
-- schema) leaves the deltas to it rather than queue behind it on the same rows: ReadCounts adds
-- the deltas not yet folded, so the counts are exact either way, and a burst of Stats calls (a
-- poke per schedule) no longer runs its folds one after the other. Index: crawlq_job_count's
-- primary key.
WITH l AS (SELECT pg_try_advisory_xact_lock(hashtext(current_schema() || '.crawlq_job_count_fold')) AS got),
     d AS (DELETE FROM crawlq_job_count_delta WHERE (SELECT got FROM l) RETURNING queue, state, n),
     s AS (SELECT queue, state, sum(n)::bigint AS n FROM d GROUP BY queue, state)
INSERT INTO crawlq_job_count AS c (queue, state, n)
SELECT queue, state, n FROM s ORDER BY queue, state
ON CONFLICT (queue, state) DO UPDATE SET n = c.n + EXCLUDED.n;

-- name: ReadCounts :many
-- The totals plus the deltas not yet folded, per queue and state, and the running jobs counted
-- from their rows (index: crawlq_job_lease). 'running' in the count tables is ignored: a process
-- of a release before migration 0018 may still write it.
SELECT queue, state, sum(n)::bigint AS n FROM (
    SELECT queue, state, n FROM crawlq_job_count WHERE state <> 'running'
    UNION ALL
    SELECT queue, state, n FROM crawlq_job_count_delta WHERE state <> 'running'
    UNION ALL
    SELECT queue, state, count(*) FROM crawlq_job WHERE state = 'running' GROUP BY queue, state
) x GROUP BY queue, state;

-- The recount rebuilds the counts from the job rows (repair after changes made outside
-- internal/queue). It counts every row, so it is for maintenance, not for stats. Client.Recount
-- runs the three statements in one REPEATABLE READ transaction: with one snapshot, a delta
-- committed meanwhile is either counted in the rows and deleted, or neither.

-- name: RecountClearDeltas :exec
DELETE FROM crawlq_job_count_delta;

-- name: RecountClearTotals :exec
DELETE FROM crawlq_job_count;

-- name: RecountFromJobs :exec
-- Reads every job row (a sequential scan of crawlq_job); running jobs are counted when read.
INSERT INTO crawlq_job_count (queue, state, n) SELECT queue, state, count(*) FROM crawlq_job WHERE state <> 'running' GROUP BY queue, state;
