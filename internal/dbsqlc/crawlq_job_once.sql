-- Every query that reads or deletes crawlq_job_once alone (internal/queue). The keys are written
-- by the inserts of crawlq_job.sql (InsertJobsOnce, InsertHeldJobs), in the same statement as the
-- jobs they let through. The table is in internal/migrate/migrations/0001_queue.sql.

-- name: DeleteOnceKeys :one
-- Deletes up to @max_keys once keys of @parent_id after key @after, in key order, only while the
-- parent is settled (ParentSettled in crawlq_job.sql, checked in the same statement, so a caller
-- that judged it settled a moment ago cannot be wrong by now). It returns how many it deleted and
-- the last key. Index: crawlq_job_once's primary key, read from (@parent_id, @after) on: each batch
-- starts where the last ended, never stepping over the rows deleted before it (which stay in the
-- heap and index until vacuum; without the cursor a run of 200,000 keys deleted 100 times slower).
-- Settled uses crawlq_job_parent (unfinished) and crawlq_job_parent_dead.
WITH k AS (
    SELECT h FROM crawlq_job_once WHERE parent_id = sqlc.arg(parent_id)::bigint AND h > sqlc.arg(after)::uuid ORDER BY h LIMIT sqlc.arg(max_keys)::int
), d AS (
    DELETE FROM crawlq_job_once
    WHERE parent_id = sqlc.arg(parent_id)::bigint AND h = ANY (ARRAY(SELECT h FROM k))
      AND NOT EXISTS (SELECT 1 FROM crawlq_job WHERE parent_id = sqlc.arg(parent_id)::bigint AND state IN ('available', 'scheduled', 'running'))
      AND NOT EXISTS (SELECT 1 FROM crawlq_job WHERE parent_id = sqlc.arg(parent_id)::bigint AND state = 'dead')
    RETURNING h
)
SELECT count(*) AS deleted, COALESCE((SELECT h FROM d ORDER BY h DESC LIMIT 1), sqlc.arg(after)::uuid)::uuid AS last FROM d;
