-- Every query on crawlq_worker (internal/queue): workers and runners register and heartbeat here,
-- so the dispatcher counts live ones from Postgres. The table is in
-- internal/migrate/migrations/0001_queue.sql.

-- name: WorkerBeat :exec
-- Registers a worker or refreshes its heartbeat. Index: the primary key.
INSERT INTO crawlq_worker (id, queue, kind, jobs_done, started_at, seen_at)
VALUES (sqlc.arg(id)::text, sqlc.arg(queue)::text, sqlc.arg(kind)::text, sqlc.arg(jobs_done)::bigint, coalesce(sqlc.narg(now)::timestamptz, now()), coalesce(sqlc.narg(now)::timestamptz, now()))
ON CONFLICT (id) DO UPDATE SET seen_at = EXCLUDED.seen_at, jobs_done = EXCLUDED.jobs_done;

-- name: WorkerGone :exec
-- Removes a worker that stopped cleanly. Index: the primary key.
DELETE FROM crawlq_worker WHERE id = sqlc.arg(id)::text;

-- name: LiveWorkers :many
-- Counts workers seen within @horizon_us microseconds, per queue and kind, optionally for one
-- @queue (''). Index: crawlq_worker_seen.
SELECT queue, kind, count(*) AS n FROM crawlq_worker
WHERE (sqlc.arg(queue)::text = '' OR queue = sqlc.arg(queue)::text)
  AND seen_at > coalesce(sqlc.narg(now)::timestamptz, now()) - sqlc.arg(horizon_us)::bigint * interval '1 microsecond'
GROUP BY queue, kind;

-- name: PruneWorkers :execrows
-- Forgets workers not seen for @horizon_us microseconds (they died without saying so). Index:
-- crawlq_worker_seen does not lead with seen_at, so this scans the table, which is as small as the
-- fleet.
DELETE FROM crawlq_worker WHERE seen_at < coalesce(sqlc.narg(now)::timestamptz, now()) - sqlc.arg(horizon_us)::bigint * interval '1 microsecond';
