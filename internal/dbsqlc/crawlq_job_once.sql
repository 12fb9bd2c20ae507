-- Deleting a parent's once keys (internal/queue). A key is kept on the job that used it
-- (crawlq_job.once_h, migration 0015), written by the inserts of crawlq_job.sql (InsertJobsOnce,
-- InsertHeldJobs) with the job; crawlq_job_once holds the keys written before that migration. The
-- tables are in internal/migrate/migrations/0001_queue.sql and 0015_job_once_key.sql.

-- name: DeleteOnceKeys :one
-- Deletes up to @max_keys once keys of @parent_id after key @after, in key order, with the jobs
-- that carry them, only while the parent is settled (ParentSettled in crawlq_job.sql, checked in
-- the same statement, so a caller that judged it settled a moment ago cannot be wrong by now;
-- then every job of it is finished and none dead). It returns how many keys it deleted and the
-- last key. Indexes: crawlq_job_once_key and crawlq_job_once's primary key, each read from
-- (@parent_id, @after) on: each batch starts where the last ended, never stepping over the rows
-- deleted before it (which stay in the heap and index until vacuum; without the cursor a run of
-- 200,000 keys deleted 100 times slower). Settled uses crawlq_job_parent (unfinished) and
-- crawlq_job_parent_dead. The deleted jobs leave the counts like retention's.
WITH settled AS (
    SELECT NOT EXISTS (SELECT 1 FROM crawlq_job WHERE parent_id = sqlc.arg(parent_id)::bigint AND state IN ('available', 'scheduled', 'running'))
       AND NOT EXISTS (SELECT 1 FROM crawlq_job WHERE parent_id = sqlc.arg(parent_id)::bigint AND state = 'dead') AS ok
), k AS (
    SELECT h FROM (
        (SELECT once_h AS h FROM crawlq_job
         WHERE coalesce(parent_id, 0) = sqlc.arg(parent_id)::bigint AND once_h IS NOT NULL AND once_h > sqlc.arg(after)::uuid
         ORDER BY once_h LIMIT sqlc.arg(max_keys)::int)
        UNION ALL
        (SELECT h FROM crawlq_job_once WHERE parent_id = sqlc.arg(parent_id)::bigint AND h > sqlc.arg(after)::uuid ORDER BY h LIMIT sqlc.arg(max_keys)::int)
    ) u ORDER BY h LIMIT sqlc.arg(max_keys)::int
), dj AS (
    DELETE FROM crawlq_job
    WHERE coalesce(parent_id, 0) = sqlc.arg(parent_id)::bigint AND once_h = ANY (ARRAY(SELECT h FROM k)) AND once_h IS NOT NULL
      AND state IN ('succeeded', 'cancelled', 'dead') AND (SELECT ok FROM settled)
    RETURNING once_h AS h, queue, state
), dk AS (
    DELETE FROM crawlq_job_once
    WHERE parent_id = sqlc.arg(parent_id)::bigint AND h = ANY (ARRAY(SELECT h FROM k)) AND (SELECT ok FROM settled)
    RETURNING h
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n) SELECT queue, state, -count(*) FROM dj GROUP BY queue, state
), d AS (
    SELECT h FROM dj UNION ALL SELECT h FROM dk
)
SELECT count(*) AS deleted, COALESCE((SELECT h FROM d ORDER BY h DESC LIMIT 1), sqlc.arg(after)::uuid)::uuid AS last FROM d;
