-- Every query on crawlq_run: spider runs (internal/crawl). The table and its indexes are in
-- internal/migrate/migrations/0002_crawl.sql, 0005_run_outcomes.sql, 0008_maintain.sql and
-- 0021_run_host_pauses.sql. A run's counters are not written here per page (crawlq_run_stat.sql);
-- they are folded in when the run finishes (FinishRun).

-- name: InsertRun :one
-- Creates a run, due at run_at, else delay_us (microseconds) from now. With an idempotency key already held by an
-- unfinished run of the same spider it returns that run instead: (xmax <> 0) marks the conflict
-- path. Index: crawlq_run_idempotency (the conflict target).
INSERT INTO crawlq_run (spider, args, settings, priority, queue, idempotency_key, page_budget, run_at, max_dead_share)
VALUES (@spider, sqlc.arg(args)::text::jsonb, sqlc.arg(settings)::text::jsonb, @priority, @queue, NULLIF(@idempotency_key::text, ''),
        NULLIF(@page_budget::bigint, 0), COALESCE(sqlc.narg(run_at)::timestamptz, now() + sqlc.arg(delay_us)::bigint * interval '1 microsecond'),
        @max_dead_share)
ON CONFLICT (spider, idempotency_key) WHERE idempotency_key IS NOT NULL AND state IN ('pending', 'running')
DO UPDATE SET spider = EXCLUDED.spider
RETURNING id, (xmax <> 0)::boolean AS duplicate, state, run_at;

-- name: MoveRun :exec
-- Moves a pending run's start time (a duplicate schedule in replace mode). Index: the primary key.
UPDATE crawlq_run SET run_at = @run_at, priority = @priority WHERE id = @id AND state = 'pending';

-- name: GetRun :one
-- Reads a run. Index: the primary key.
SELECT * FROM crawlq_run WHERE id = @id;

-- name: ListRuns :many
-- Lists runs newest first, optionally of one spider (spider '': all), in some states (none: all),
-- below an id (0: from the newest). Index: the primary key walked backwards, stopping at the
-- limit; crawlq_run_spider (spider, id DESC) when a spider is named and the plan is custom.
SELECT * FROM crawlq_run
WHERE (sqlc.arg(spider)::text = '' OR spider = sqlc.arg(spider)::text)
  AND (cardinality(sqlc.arg(states)::text[]) = 0 OR state::text = ANY(sqlc.arg(states)::text[]))
  AND (sqlc.arg(before_id)::bigint = 0 OR id < sqlc.arg(before_id)::bigint)
ORDER BY id DESC
LIMIT @max_runs;

-- name: StartRun :exec
-- Marks a run running when its run job starts it. Index: the primary key.
UPDATE crawlq_run SET state = 'running', started_at = COALESCE(started_at, now())
WHERE id = @id AND state IN ('pending', 'running');

-- name: SetRunError :exec
-- Records why a run cannot proceed (it finishes as failed). Index: the primary key.
UPDATE crawlq_run SET error = @error::text WHERE id = @id;

-- name: RequestRunCancel :one
-- Marks an unfinished run for cancellation; no row back: the run is unknown or finished. Index:
-- the primary key.
UPDATE crawlq_run SET cancel_requested = true
WHERE id = @id AND state IN ('pending', 'running')
RETURNING id;

-- name: FinishRun :one
-- Finishes a run exactly once: the state predicate makes a second caller match nothing (no row
-- back). Stats are folded from crawlq_run_stat. The caller has checked, through the queue, that
-- the run has no unfinished job; none can appear afterwards, because only a running job of the
-- run adds more. dead_pages is the number of the run's dead pages and failed_pages a sample of
-- them (JSON); errors counts them beside the failures its pages recorded as they ended (a dead
-- page's stat rows count no error: it is an error while it is dead); stored_items the items its sink holds (-1: unknown, use the items its pages
-- yielded). The outcome (see crawl's Run states): cancelled when asked; failed when the run job
-- failed, when nothing was fetched but pages died or erred, or when the dead share passes
-- max_dead_share; incomplete when any page died; else succeeded. Items its pages wrote that the
-- sink does not hold apart (their key was an earlier item's: the items stat less stored_items, the
-- stat after a redrive starting from the items stored before it) are counted in errors_by_kind's
-- items_duplicate_key beside the repeats the spider found on a page, and returned
-- (duplicate_items). Indexes: crawlq_run_stat_run for the fold, the primary key for the run.
WITH p AS (
    SELECT @id::bigint AS id, @dead_pages::bigint AS dead, sqlc.arg(failed_pages)::text::jsonb AS failed,
           @stored_items::bigint AS stored
), s AS (
    SELECT COALESCE(sum(pages), 0)::bigint AS pages, COALESCE(sum(items), 0)::bigint AS items,
           COALESCE(sum(bytes), 0)::bigint AS bytes, COALESCE(sum(errors), 0)::bigint AS errors,
           COALESCE(sum(retries), 0)::bigint AS retries, COALESCE(sum(host_pauses), 0)::bigint AS host_pauses
    FROM crawlq_run_stat WHERE run_id = (SELECT id FROM p)
), dup AS (
    SELECT CASE WHEN p.stored >= 0 THEN GREATEST(s.items - p.stored, 0) ELSE 0 END::bigint AS n FROM s, p
), k AS (
    SELECT COALESCE(jsonb_object_agg(kind, n), '{}'::jsonb) AS by_kind
    FROM (SELECT kind, sum(n) AS n
          FROM (SELECT kind, n FROM crawlq_run_stat WHERE run_id = (SELECT id FROM p) AND kind IS NOT NULL
                UNION ALL SELECT 'items_duplicate_key', dup.n FROM dup WHERE dup.n > 0) y
          GROUP BY kind) x
), o AS (
    SELECT CASE
        WHEN r.cancel_requested THEN 'cancelled'
        WHEN r.error IS NOT NULL OR r.started_at IS NULL THEN 'failed'
        WHEN s.pages = 0 AND (p.dead > 0 OR s.errors > 0) THEN 'failed'
        WHEN p.dead > 0 AND p.dead::float8 / (p.dead + s.pages) > r.max_dead_share THEN 'failed'
        WHEN p.dead > 0 THEN 'incomplete'
        ELSE 'succeeded' END AS state
    FROM crawlq_run r, s, p WHERE r.id = p.id
)
UPDATE crawlq_run r
SET state = o.state::crawlq_run_state,
    error = CASE
        WHEN r.error IS NOT NULL OR o.state = 'cancelled' THEN r.error
        WHEN r.started_at IS NULL THEN 'the run job failed before starting the crawl'
        WHEN p.dead > 0 THEN format('%s of %s pages died (their retries spent, their host down past its limit, or their address refused: see failed_pages); crawlq redrive --run %s retries them',
                                    p.dead, p.dead + s.pages, r.id)
        ELSE r.error END,
    finished_at = now(), pages = s.pages,
    items = CASE WHEN p.stored >= 0 THEN p.stored ELSE s.items END,
    bytes = s.bytes, errors = s.errors + p.dead, retries = s.retries, host_pauses = s.host_pauses, errors_by_kind = k.by_kind,
    dead_pages = p.dead, failed_pages = p.failed
FROM s, k, o, p
WHERE r.id = p.id AND r.state IN ('pending', 'running')
RETURNING r.state, (SELECT n FROM dup)::bigint AS duplicate_items;

-- name: ReopenRun :one
-- Reopens a finished run whose dead pages were redriven (in the same transaction): it runs again
-- and finishes again, once, when they are done. Its folded stats become its one stat row per
-- kind again (maintenance may have removed the rows they were folded from), so the next fold
-- counts them once. Returns the state it had; no row: the run is live, cancelled, succeeded or
-- unknown. Indexes: the primary key, crawlq_run_stat_run for the delete.
WITH r0 AS (
    SELECT r.id, r.state FROM crawlq_run r
    WHERE r.id = @id::bigint AND r.state IN ('incomplete', 'failed') AND NOT r.cancel_requested
    FOR UPDATE
), gone AS (
    DELETE FROM crawlq_run_stat WHERE run_id IN (SELECT id FROM r0)
), base AS (
    INSERT INTO crawlq_run_stat (run_id, pages, items, bytes, errors, retries, host_pauses, kind, n)
    SELECT r.id, r.pages, r.items, r.bytes, r.errors, r.retries, r.host_pauses, NULL, 1
    FROM crawlq_run r JOIN r0 USING (id)
    UNION ALL
    SELECT r.id, 0, 0, 0, 0, 0, 0, k, v::int
    FROM crawlq_run r JOIN r0 USING (id), jsonb_each_text(r.errors_by_kind) e(k, v)
)
UPDATE crawlq_run r
SET state = 'running', finished_at = NULL, error = NULL, dead_pages = 0, failed_pages = '[]'
FROM r0 WHERE r.id = r0.id
RETURNING r0.state;

-- name: RunDeadPageOrigins :many
-- The origins (scheme and authority) of run @run_id's dead page jobs, each once: whose hosts a
-- redrive clears the pauses of (crawl's redrive.go makes them hosts). Index: crawlq_job_parent_dead.
SELECT DISTINCT substring(j.args ->> 'url' from '^[^:/?#]+://[^/?#]*')::text AS origin
FROM crawlq_job j
WHERE j.parent_id = @run_id::bigint AND j.state = 'dead' AND j.kind = @kind::text AND j.args ? 'url';

-- name: RunQueue :one
-- The queue of a run's jobs. Index: the primary key.
SELECT queue FROM crawlq_run WHERE id = @id;

-- name: SweepRuns :many
-- Lists the unfinished runs after an id that the sweep must look at: those with no unfinished job
-- left (to finish) and those asked to cancel (to cancel what a page added after the request).
-- Filtering here rather than asking about each run keeps the sweep one statement per 500 live
-- runs, however many are waiting on delayed start jobs. Indexes: crawlq_run_live, whose predicate
-- is exactly these states, so it holds only live runs; crawlq_job_parent for the NOT EXISTS.
SELECT r.id, r.cancel_requested FROM crawlq_run r
WHERE r.state IN ('pending', 'running') AND r.id > @after_id
  AND (r.cancel_requested OR NOT EXISTS (
    SELECT 1 FROM crawlq_job j WHERE j.parent_id = r.id AND j.state IN ('available', 'scheduled', 'running')))
ORDER BY r.id
LIMIT @max_runs;

-- name: SpiderStats :many
-- Sums pages, items and errors per spider over runs finished since a time, and the pages a
-- site banned and the proxy failures (errors_by_kind's "banned" and "proxy", counted as retries,
-- not errors; 0 when absent), and counts runs succeeded, incomplete and failed (the metrics
-- function, once per period). No index on finished_at serves it (crawlq_run_purge holds only
-- unpurged runs): a scan of crawlq_run.
SELECT spider,
       COALESCE(sum(pages), 0)::bigint AS pages, COALESCE(sum(items), 0)::bigint AS items,
       COALESCE(sum(errors), 0)::bigint AS errors, COALESCE(sum(dead_pages), 0)::bigint AS dead_pages,
       COALESCE(sum((errors_by_kind->>'banned')::bigint), 0)::bigint AS bans,
       COALESCE(sum((errors_by_kind->>'proxy')::bigint), 0)::bigint AS proxy_failures,
       count(*) FILTER (WHERE state = 'succeeded') AS runs_succeeded,
       count(*) FILTER (WHERE state = 'incomplete') AS runs_incomplete,
       count(*) FILTER (WHERE state = 'failed') AS runs_failed
FROM crawlq_run WHERE finished_at >= @since::timestamptz
GROUP BY spider;

-- name: LockRunBudget :one
-- Reads a run's page budget (-1: none) and locks it until commit, so concurrent pages of the run
-- take from it one after the other. Index: the primary key.
SELECT COALESCE(page_budget, -1)::bigint AS page_budget FROM crawlq_run WHERE id = @id FOR UPDATE;

-- name: SpendRunBudget :exec
-- Takes the pages a page added from its run's budget (locked by LockRunBudget). Index: the
-- primary key.
UPDATE crawlq_run SET page_budget = GREATEST(page_budget - @pages::bigint, 0) WHERE id = @id;

-- name: PurgeCandidates :many
-- Lists up to max_runs runs that finished before a time and whose leftovers (once keys,
-- robots.txt copies, stat rows) are not yet deleted, oldest first. A run that is live again
-- (reopened) is not finished and so not listed. Index: crawlq_run_purge (0008), whose predicate
-- keeps only unpurged finished runs.
SELECT id FROM crawlq_run
WHERE finished_at IS NOT NULL AND purged_at IS NULL AND finished_at < @before::timestamptz
  AND state NOT IN ('pending', 'running')
ORDER BY finished_at
LIMIT @max_runs;

-- name: MarkRunPurged :exec
-- Records that a finished run's leftovers are gone, so PurgeCandidates does not list it again.
-- Index: the primary key.
UPDATE crawlq_run SET purged_at = now()
WHERE id = @id AND finished_at IS NOT NULL AND state NOT IN ('pending', 'running');

-- name: RunFetchedAny :one
-- Whether any page of a run has been fetched: until one has, its hosts' shorter start down limit
-- applies (crawl's hostpause.go). Index: crawlq_run_stat_run.
SELECT EXISTS (SELECT 1 FROM crawlq_run_stat WHERE run_id = @run_id AND pages > 0) AS fetched;

-- name: LastGoodRunStart :one
-- When the spider's last succeeded run before run before_id started (the epoch: none): a sitemap's
-- since: last_run schedules only the URLs changed after it. Index: crawlq_run_spider.
SELECT COALESCE(max(started_at), 'epoch'::timestamptz)::timestamptz AS started_at FROM crawlq_run
WHERE spider = @spider AND id < @before_id AND state = 'succeeded';
