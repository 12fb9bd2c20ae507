-- A read-only query of crawlq_job (internal/queue's table) by internal/events. It belongs in
-- crawlq_job.sql with queue's queries, and sits apart only to keep parallel work on that file
-- mergeable. TODO(merge): move it into crawlq_job.sql.

-- name: RunJobDepth :one
-- Counts a live run's waiting and running page jobs (what `crawlq run --watch` shows as its
-- queue depth). Index: crawlq_job_parent, whose predicate is these states.
SELECT count(*) FILTER (WHERE state IN ('available', 'scheduled')) AS waiting,
       count(*) FILTER (WHERE state = 'running') AS running
FROM crawlq_job WHERE parent_id = @parent_id::bigint AND state IN ('available', 'scheduled', 'running');
