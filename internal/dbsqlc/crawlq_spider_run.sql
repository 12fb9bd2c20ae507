-- Every query on crawlq_spider_run: what a run of a stored spider was scheduled with and ran
-- (internal/spiderstore; the table is in internal/migrate/migrations/0006_spiders.sql).

-- name: InsertSpiderRun :exec
-- Records what a run was scheduled with (jobid '': the client gave none). The row may be there
-- already, with the version the crawl pinned in the run's own transaction (PinSpiderRun) or the
-- run started with (StartSpecRun): that version is kept, the rest is filled in. A jobid another
-- run holds fails with a unique violation (23505). Indexes: the primary key, the jobid unique
-- index.
INSERT INTO crawlq_spider_run (run_id, project, spider, version, jobid, settings)
VALUES (@run_id, @project, @spider, @version, NULLIF(@jobid::text, ''), sqlc.arg(settings)::text::jsonb)
ON CONFLICT (run_id) DO UPDATE
SET project = EXCLUDED.project, jobid = EXCLUDED.jobid, settings = EXCLUDED.settings,
    version = CASE WHEN crawlq_spider_run.version = '' THEN EXCLUDED.version ELSE crawlq_spider_run.version END;

-- name: PinSpiderRun :exec
-- Records the stored version a run was scheduled to run, in the transaction that inserts the run,
-- so no worker can start it before the pin is there. Index: the primary key (the conflict target).
INSERT INTO crawlq_spider_run (run_id, spider, version)
VALUES (@run_id, @spider, @version)
ON CONFLICT (run_id) DO NOTHING;

-- name: SpiderRunVersion :one
-- The version a run pinned or started with ('' for none). Index: the primary key.
SELECT version FROM crawlq_spider_run WHERE run_id = @run_id;

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
-- Records the version a run resolved to (keeping one pinned at schedule or recorded by the crawl
-- when it started the run), its project and its pid (0: none), and returns the version the run
-- must use; a run scheduled without a record (crawlq schedule) gets one here. Index: the primary key (the conflict target).
INSERT INTO crawlq_spider_run (run_id, project, spider, version, pid)
VALUES (@run_id, @project, @spider, @version, NULLIF(@pid::int, 0))
ON CONFLICT (run_id) DO UPDATE
SET version = CASE WHEN crawlq_spider_run.version = '' THEN EXCLUDED.version ELSE crawlq_spider_run.version END,
    project = CASE WHEN crawlq_spider_run.project = '' THEN EXCLUDED.project ELSE crawlq_spider_run.project END,
    pid = COALESCE(EXCLUDED.pid, crawlq_spider_run.pid)
RETURNING version;

-- name: StartSpecRun :exec
-- Records the version of a stored spider a run starts with, unless one was pinned at schedule
-- (the run started with that one): every later page of the run, in any process, runs this
-- version. Index: the primary key (the conflict target).
INSERT INTO crawlq_spider_run (run_id, spider, version)
VALUES (@run_id, @spider, @version)
ON CONFLICT (run_id) DO UPDATE SET version = EXCLUDED.version
WHERE crawlq_spider_run.version = '';

-- name: RequestSpiderRunCancel :one
-- Records a cancel of a run and the signal it asked for (empty: the runner's default), and returns
-- how many cancels the run has had. A run cancelled before it recorded anything gets its row
-- here (StartSpiderRun fills in the rest). Index: the primary key (the conflict target).
INSERT INTO crawlq_spider_run (run_id, spider, cancel_signal, cancels)
VALUES (@run_id, @spider, @cancel_signal::text, 1)
ON CONFLICT (run_id) DO UPDATE
SET cancel_signal = EXCLUDED.cancel_signal, cancels = crawlq_spider_run.cancels + 1
RETURNING cancels;

-- name: SpiderRunCancel :one
-- The signal a run's last cancel asked for and how many cancels it has had (the runner polls it
-- while a cancelled command shuts down). Index: the primary key.
SELECT cancel_signal, cancels FROM crawlq_spider_run WHERE run_id = @run_id;
