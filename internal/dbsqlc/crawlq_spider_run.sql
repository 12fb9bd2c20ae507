-- Every query on crawlq_spider_run: what a run of a stored spider was scheduled with and ran
-- (internal/spiderstore; the table is in internal/migrate/migrations/0006_spiders.sql).

-- name: InsertSpiderRun :exec
-- Records what a run was scheduled with (jobid '': the client gave none). A second record of the
-- same run is a no-op; a jobid another run holds fails with a unique violation (23505). Indexes:
-- the primary key, the jobid unique index.
INSERT INTO crawlq_spider_run (run_id, project, spider, version, jobid, settings)
VALUES (@run_id, @project, @spider, @version, NULLIF(@jobid::text, ''), sqlc.arg(settings)::text::jsonb)
ON CONFLICT (run_id) DO NOTHING;

-- name: GetSpiderRun :one
-- A run's record. Index: the primary key.
SELECT * FROM crawlq_spider_run WHERE run_id = @run_id;

-- name: SpiderRunByJobID :one
-- The run that holds a client's job id. Index: the jobid unique index.
SELECT run_id FROM crawlq_spider_run WHERE jobid = @jobid::text;

-- name: SpiderRuns :many
-- The records of many runs. Index: the primary key.
SELECT * FROM crawlq_spider_run WHERE run_id = ANY(@run_ids::bigint[]);

-- name: StartSpiderRun :one
-- Records the version a run resolved to (keeping one pinned at schedule) and its pid (0: none),
-- and returns the version the run must use; a run scheduled without a record (crawlq schedule,
-- the plain api) gets one here. Index: the primary key (the conflict target).
INSERT INTO crawlq_spider_run (run_id, project, spider, version, pid)
VALUES (@run_id, @project, @spider, @version, NULLIF(@pid::int, 0))
ON CONFLICT (run_id) DO UPDATE
SET version = CASE WHEN crawlq_spider_run.version = '' THEN EXCLUDED.version ELSE crawlq_spider_run.version END,
    pid = COALESCE(EXCLUDED.pid, crawlq_spider_run.pid)
RETURNING version;

-- name: StartSpecRun :exec
-- Records the version of a stored spec a run starts with. Unlike StartSpiderRun it overwrites
-- the version written at schedule: a spec run always takes the newest version when it starts (a
-- pin is refused unless it is the newest), so a push between schedule and start changes what it
-- ran. Index: the primary key (the conflict target).
INSERT INTO crawlq_spider_run (run_id, spider, version)
VALUES (@run_id, @spider, @version)
ON CONFLICT (run_id) DO UPDATE SET version = EXCLUDED.version;
