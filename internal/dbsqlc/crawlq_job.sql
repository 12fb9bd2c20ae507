-- Every query on crawlq_job (internal/queue runs them; nothing else touches job rows).
-- The table and its indexes are in internal/migrate/migrations/0001_queue.sql; each comment names
-- the index a query relies on.
--
-- The clock: every statement takes @now, the time it acts at, and uses the database's now() when it
-- is NULL (in production: workers with skewed clocks then agree). Tests pass a time of their own
-- and move it instead of sleeping.
--
-- The counts: every statement that changes a job's state records its effect on the per-queue state
-- counts in a last CTE, cnt, an insert into crawlq_job_count_delta of the net change per (queue,
-- state): the rows it changed counted in their new state, minus the same rows in their old one
-- (crawlq_job_count.sql folds and reads them). So the counts stay exact without triggers and
-- without a counter row that workers contend on. Running jobs are the exception: they are counted
-- from their rows when read, so no statement records 'running' (migration 0018).
--
-- Locks: a statement that updates several given rows locks them first in id order (a CTE with
-- ORDER BY id FOR UPDATE, or, in the functions of migration 0010, lookups in id order), so two
-- such statements on overlapping rows (a heartbeat and a completion of the same leases) wait for
-- each other instead of deadlocking.
--
-- The claim, the completions and the held insert run for every job: their statements are PL/pgSQL
-- functions (migration 0010, which says why; the held insert's is 0011's), and the queries here
-- call them.

-- name: InsertJobs :many
-- Inserts a batch given as parallel arrays in one round trip. A job whose run_at is still in the
-- future starts as 'scheduled'; a zero run_at means now plus its delay (microseconds). @mode is what
-- a job whose unique key an unfinished job of its queue holds does (index: crawlq_job_unique):
-- 'keep' leaves the existing job as it is (rewriting a column with its own value, so the row is
-- returned; an unchanged indexed value keeps the update HOT), 'replace' moves its run_at and
-- priority, 'earliest' keeps the earlier run_at. A running duplicate is left as it is in every mode:
-- moving the run_at of a job that is already running would mean nothing. dup is true for rows that
-- took the conflict path: only they set prev_state (to the state they had, for the count delta).
WITH ins AS (
INSERT INTO crawlq_job (queue, kind, state, priority, run_at, max_attempts, unique_key, parent_id, args)
SELECT q, k, (CASE WHEN r <= coalesce(sqlc.narg(now)::timestamptz, now()) THEN 'available' ELSE 'scheduled' END)::crawlq_job_state,
       p, r, m, NULLIF(u, ''), NULLIF(par, 0), a::jsonb
FROM (
    SELECT q, k, p, COALESCE(NULLIF(ra, '0001-01-01 00:00:00+00'::timestamptz),
                             coalesce(sqlc.narg(now)::timestamptz, now()) + d * interval '1 microsecond') AS r,
           m, u, par, a, o
    FROM (
        SELECT unnest(sqlc.arg(queues)::text[]) AS q, unnest(sqlc.arg(kinds)::text[]) AS k,
               unnest(sqlc.arg(priorities)::smallint[]) AS p, unnest(sqlc.arg(run_ats)::timestamptz[]) AS ra,
               unnest(sqlc.arg(delays_us)::bigint[]) AS d, unnest(sqlc.arg(max_attempts)::int[]) AS m,
               unnest(sqlc.arg(unique_keys)::text[]) AS u, unnest(sqlc.arg(parent_ids)::bigint[]) AS par,
               unnest(sqlc.arg(args)::text[]) AS a, generate_series(1, cardinality(sqlc.arg(queues)::text[])) AS o
    ) t
) s
ORDER BY o
ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND state IN ('available', 'scheduled', 'running')
DO UPDATE SET
    run_at = CASE
        WHEN crawlq_job.state = 'running' THEN crawlq_job.run_at
        WHEN sqlc.arg(mode)::text = 'replace' THEN EXCLUDED.run_at
        WHEN sqlc.arg(mode)::text = 'earliest' THEN LEAST(crawlq_job.run_at, EXCLUDED.run_at)
        ELSE crawlq_job.run_at END,
    priority = CASE
        WHEN crawlq_job.state <> 'running' AND sqlc.arg(mode)::text = 'replace' THEN EXCLUDED.priority
        ELSE crawlq_job.priority END,
    state = CASE
        WHEN crawlq_job.state = 'running' THEN crawlq_job.state
        WHEN sqlc.arg(mode)::text = 'replace' THEN EXCLUDED.state
        WHEN sqlc.arg(mode)::text = 'earliest' THEN
            CASE WHEN LEAST(crawlq_job.run_at, EXCLUDED.run_at) <= coalesce(sqlc.narg(now)::timestamptz, now())
                 THEN 'available'::crawlq_job_state ELSE 'scheduled'::crawlq_job_state END
        ELSE crawlq_job.state END,
    prev_state = crawlq_job.state
RETURNING id, (prev_state IS NOT NULL) AS dup, COALESCE(unique_key, '') AS key, queue, state, prev_state
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n)
    SELECT queue, state, sum(n) FROM (
        SELECT queue, state, count(*) AS n FROM ins GROUP BY queue, state
        UNION ALL
        SELECT queue, prev_state, -count(*) FROM ins WHERE dup GROUP BY queue, prev_state
    ) x
    GROUP BY queue, state HAVING sum(n) <> 0
)
SELECT ins.id, ins.dup::boolean AS dup, ins.key::text AS key FROM ins;

-- name: InsertJobsOnce :many
-- Inserts jobs without unique keys, skipping those whose once key (@hashes: the MD5 of each, NULL
-- for none) was used before, and at most @max_jobs of them (0: all), the first in order not
-- skipped. A job carries its key (once_h): a key is used when a job of the parent has it (index:
-- crawlq_job_once_key) or when crawlq_job_once has it from before migration 0015 (its primary
-- key). With a limit, those found used are left out before it; ON CONFLICT on crawlq_job_once_key
-- decides between concurrent inserts of one key (the loser is skipped). Each job's id is drawn
-- from the sequence before the insert, so the answer pairs each inserted job's id with its 1-based
-- position in the input however many were skipped.
WITH src AS (
    SELECT q, k, p, COALESCE(NULLIF(ra, '0001-01-01 00:00:00+00'::timestamptz),
                             coalesce(sqlc.narg(now)::timestamptz, now()) + d * interval '1 microsecond') AS r,
           m, par, a, h, o
    FROM (
        SELECT unnest(sqlc.arg(queues)::text[]) AS q, unnest(sqlc.arg(kinds)::text[]) AS k,
               unnest(sqlc.arg(priorities)::smallint[]) AS p, unnest(sqlc.arg(run_ats)::timestamptz[]) AS ra,
               unnest(sqlc.arg(delays_us)::bigint[]) AS d, unnest(sqlc.arg(max_attempts)::int[]) AS m,
               unnest(sqlc.arg(parent_ids)::bigint[]) AS par, unnest(sqlc.arg(args)::text[]) AS a,
               unnest(sqlc.arg(hashes)::uuid[]) AS h, generate_series(1, cardinality(sqlc.arg(queues)::text[])) AS o
    ) t
), pick AS (
    SELECT src.*, nextval(s.seq) AS nid
    FROM (SELECT src.* FROM src
          WHERE src.h IS NULL
             OR ((sqlc.arg(max_jobs)::int = 0
                  OR NOT EXISTS (SELECT 1 FROM crawlq_job j WHERE coalesce(j.parent_id, 0) = src.par AND j.once_h = src.h))
                 AND NOT EXISTS (SELECT 1 FROM crawlq_job_once x WHERE x.parent_id = src.par AND x.h = src.h))
          ORDER BY src.o
          LIMIT NULLIF(sqlc.arg(max_jobs)::int, 0)) src,
         (SELECT pg_get_serial_sequence('crawlq_job', 'id')::regclass AS seq OFFSET 0) s
), ins AS (
    INSERT INTO crawlq_job (id, queue, kind, state, priority, run_at, max_attempts, parent_id, args, once_h)
    SELECT nid, q, k, (CASE WHEN r <= coalesce(sqlc.narg(now)::timestamptz, now()) THEN 'available' ELSE 'scheduled' END)::crawlq_job_state,
           p, r, m, NULLIF(par, 0), a::jsonb, h
    FROM pick ORDER BY o
    ON CONFLICT ((coalesce(parent_id, 0)), once_h) WHERE once_h IS NOT NULL DO NOTHING
    RETURNING id, queue, state
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n)
    SELECT queue, state, count(*) FROM ins GROUP BY queue, state
)
SELECT ins.id::bigint AS id, pick.o::bigint AS position FROM ins JOIN pick ON pick.nid = ins.id;

-- name: InsertHeldJobs :many
-- Inserts jobs that start out running, leased to @worker with @lease_token for @lease_ms
-- milliseconds: work a process found for itself and hands to its own idle handlers, skipping the
-- claim (queue.Reservation). They count as running from the start. Jobs whose once key (@hashes)
-- was used before are skipped (as in InsertJobsOnce). The statement is InsertJobsOnce's
-- with the lease set, in the PL/pgSQL function crawlq_insert_held_job_ids (migrations 0011, 0015: each
-- page's links run it, and a function's plan is made once per session, not on every call). It
-- answers with each new job's id, its 1-based position in the arrays, and the instant it started
-- (also its run_at and created_at): the caller knows the rest of the job.
SELECT id::bigint AS id, pos::int AS pos, started_at::timestamptz AS started_at FROM crawlq_insert_held_job_ids(
    sqlc.arg(queues)::text[], sqlc.arg(kinds)::text[], sqlc.arg(priorities)::smallint[], sqlc.arg(max_attempts)::int[],
    sqlc.arg(parent_ids)::bigint[], sqlc.arg(args)::text[], sqlc.arg(hashes)::uuid[],
    sqlc.arg(lease_ms)::bigint, sqlc.arg(lease_token)::bigint, sqlc.arg(worker)::text, sqlc.narg(now)::timestamptz);

-- name: NextJobIDs :many
-- Draws ids for the COPY path from the identity sequence of crawlq_job.id (COPY returns no ids; the
-- sequence caches 1000 per session). The sequence is looked up once, in a subquery OFFSET 0 keeps
-- apart: called per row, pg_get_serial_sequence's catalog lookups were ~15% of a bulk insert's
-- database CPU.
SELECT nextval(s.seq)::bigint AS id
FROM (SELECT pg_get_serial_sequence('crawlq_job', 'id')::regclass AS seq OFFSET 0) s,
     generate_series(1, sqlc.arg(n)::int);

-- name: ClaimJobs :many
-- Leases up to @max_jobs due jobs of @queue, highest priority first, then oldest run_at.
-- Index: crawlq_job_claim (only available rows, in exactly this order), so the scan stops after
-- @max_jobs rows however deep the backlog. SKIP LOCKED lets concurrent claimers pass each other.
-- "id = ANY (ARRAY(...))" makes the update find the picked rows through the primary key; a join
-- with the CTE lets the planner choose a hash join over a scan of the whole table. The statement
-- is in the PL/pgSQL function crawlq_claim_jobs (migration 0010: every job runs it, and a
-- function's plan is made once per session, not on every call).
SELECT * FROM crawlq_claim_jobs(sqlc.arg(queue)::text, sqlc.arg(max_jobs)::int, sqlc.narg(now)::timestamptz,
                                sqlc.arg(lease_ms)::bigint, sqlc.arg(lease_token)::bigint, sqlc.arg(worker)::text);

-- name: PromoteJobs :one
-- Makes up to @max_jobs delayed jobs that are now due available. Index: crawlq_job_scheduled.
WITH due AS (
    SELECT id FROM crawlq_job
    WHERE state = 'scheduled' AND run_at <= coalesce(sqlc.narg(now)::timestamptz, now())
    ORDER BY run_at
    LIMIT sqlc.arg(max_jobs)::int
    FOR UPDATE SKIP LOCKED
), promoted AS (
    UPDATE crawlq_job j SET state = 'available' WHERE j.id = ANY (ARRAY(SELECT id FROM due))
    RETURNING j.queue
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n)
    SELECT queue, 'available'::crawlq_job_state, count(*) FROM promoted GROUP BY queue
    UNION ALL
    SELECT queue, 'scheduled'::crawlq_job_state, -count(*) FROM promoted GROUP BY queue
)
SELECT count(*) FROM promoted;

-- name: HeartbeatJobs :many
-- Extends the leases still held (id and token match a running job) to @lease_ms from now, and
-- reports which of them have been asked to cancel. Leases not returned are lost. Index: the primary
-- key; the rows are locked in id order first (see Locks at the top).
WITH held AS (
    SELECT j.id, l.token::bigint AS token FROM crawlq_job j
    JOIN (SELECT unnest(sqlc.arg(ids)::bigint[]) AS id, unnest(sqlc.arg(tokens)::bigint[]) AS token) l
      ON j.id = l.id AND j.lease_token = l.token
    WHERE j.state = 'running'
    ORDER BY j.id
    FOR UPDATE OF j
)
UPDATE crawlq_job j
SET lease_until = coalesce(sqlc.narg(now)::timestamptz, now()) + sqlc.arg(lease_ms)::bigint * interval '1 millisecond'
FROM held
WHERE j.id = held.id
RETURNING j.id, held.token, j.cancel_requested;

-- name: CompleteJobs :many
-- Finishes held jobs as succeeded and returns the leases it finished; the others were lost. A job
-- asked to cancel while it ran still counts as succeeded: its work was done. Index: the primary
-- key, each lease looked up by id, rows locked in id order. The statement is in the PL/pgSQL
-- function crawlq_complete_jobs (migration 0010: every job runs it, and a function's plan is made
-- once per session, not on every call).
SELECT c.id::bigint AS id, c.token::bigint AS token
FROM crawlq_complete_jobs(sqlc.arg(ids)::bigint[], sqlc.arg(tokens)::bigint[], sqlc.narg(now)::timestamptz) AS c;

-- name: CompleteJobsOrAbort :exec
-- CompleteJobs for a transaction that must not commit without every completion (queue.Tx): when a
-- lease was lost it calls crawlq_lease_lost, which raises SQLSTATE CQ001 naming the lost ids and
-- so aborts the transaction. The statement is CompleteJobs' without its answer, in the PL/pgSQL
-- function crawlq_complete_jobs_or_abort (migration 0010: every page runs it, and a function's
-- plan is made once per session, not on every call). Index: the primary key, rows locked in id order.
SELECT crawlq_complete_jobs_or_abort(sqlc.arg(ids)::bigint[], sqlc.arg(tokens)::bigint[], sqlc.narg(now)::timestamptz);

-- name: FailJob :one
-- Records a failed attempt of a held job. @retry_us is the retry delay in microseconds, chosen by
-- the client (backoff with jitter, or the server's Retry-After); @dead forces the job dead. A job
-- asked to cancel becomes cancelled rather than retried. The error history keeps the last
-- @kept_errors attempts. Index: the primary key.
WITH failed AS (
UPDATE crawlq_job j
SET state = CASE
        WHEN j.cancel_requested THEN 'cancelled'
        WHEN sqlc.arg(dead)::boolean OR j.attempt >= j.max_attempts THEN 'dead'
        WHEN sqlc.arg(retry_us)::bigint <= 0 THEN 'available'
        ELSE 'scheduled' END::crawlq_job_state,
    run_at = CASE WHEN sqlc.arg(retry_us)::bigint > 0
                  THEN coalesce(sqlc.narg(now)::timestamptz, now()) + sqlc.arg(retry_us)::bigint * interval '1 microsecond'
                  ELSE j.run_at END,
    finished_at = CASE WHEN j.cancel_requested OR sqlc.arg(dead)::boolean OR j.attempt >= j.max_attempts
                       THEN coalesce(sqlc.narg(now)::timestamptz, now()) END,
    lease_until = NULL, lease_token = NULL,
    errors = (SELECT COALESCE(jsonb_agg(e.x ORDER BY e.n), '[]'::jsonb)
              FROM jsonb_array_elements(COALESCE(j.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
                       'attempt', j.attempt, 'at', coalesce(sqlc.narg(now)::timestamptz, now()), 'error', sqlc.arg(error)::text)))
                   WITH ORDINALITY AS e(x, n)
              WHERE e.n > jsonb_array_length(COALESCE(j.errors, '[]'::jsonb)) + 1 - sqlc.arg(kept_errors)::int)
WHERE j.id = sqlc.arg(id)::bigint AND j.lease_token = sqlc.arg(lease_token)::bigint AND j.state = 'running'
RETURNING j.state, j.run_at, j.queue
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n)
    SELECT queue, state, count(*) FROM failed GROUP BY queue, state
)
SELECT failed.state, failed.run_at FROM failed;

-- name: SnoozeJobs :many
-- Puts held jobs back to wait @delay_us microseconds without counting the attempt. With 0 it is a
-- release: the jobs are available again at their old place in line. A job asked to cancel ends
-- cancelled. Returns the leases it changed; the others were lost. Index: the primary key, rows
-- locked in id order.
WITH held AS (
    SELECT j.id, l.token::bigint AS token FROM crawlq_job j
    JOIN (SELECT unnest(sqlc.arg(ids)::bigint[]) AS id, unnest(sqlc.arg(tokens)::bigint[]) AS token) l
      ON j.id = l.id AND j.lease_token = l.token
    WHERE j.state = 'running'
    ORDER BY j.id
    FOR UPDATE OF j
), back AS (
UPDATE crawlq_job j
SET state = CASE WHEN j.cancel_requested THEN 'cancelled'
                 WHEN sqlc.arg(delay_us)::bigint <= 0 THEN 'available' ELSE 'scheduled' END::crawlq_job_state,
    run_at = CASE WHEN sqlc.arg(delay_us)::bigint > 0
                  THEN coalesce(sqlc.narg(now)::timestamptz, now()) + sqlc.arg(delay_us)::bigint * interval '1 microsecond'
                  ELSE j.run_at END,
    finished_at = CASE WHEN j.cancel_requested THEN coalesce(sqlc.narg(now)::timestamptz, now()) END,
    attempt = GREATEST(j.attempt - 1, 0), lease_until = NULL, lease_token = NULL
FROM held
WHERE j.id = held.id
RETURNING j.id, held.token, j.queue, j.state
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n)
    SELECT queue, state, count(*) FROM back GROUP BY queue, state
)
SELECT back.id, back.token FROM back;

-- name: CancelHeldJob :one
-- Ends a held job as cancelled (its handler found its run cancelled), recording why. Index: the
-- primary key.
WITH gone AS (
UPDATE crawlq_job j
SET state = 'cancelled', finished_at = coalesce(sqlc.narg(now)::timestamptz, now()), lease_until = NULL, lease_token = NULL,
    errors = (SELECT COALESCE(jsonb_agg(e.x ORDER BY e.n), '[]'::jsonb)
              FROM jsonb_array_elements(COALESCE(j.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
                       'attempt', j.attempt, 'at', coalesce(sqlc.narg(now)::timestamptz, now()), 'error', sqlc.arg(error)::text)))
                   WITH ORDINALITY AS e(x, n)
              WHERE e.n > jsonb_array_length(COALESCE(j.errors, '[]'::jsonb)) + 1 - sqlc.arg(kept_errors)::int)
WHERE j.id = sqlc.arg(id)::bigint AND j.lease_token = sqlc.arg(lease_token)::bigint AND j.state = 'running'
RETURNING j.id, j.queue
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n)
    SELECT queue, 'cancelled'::crawlq_job_state, count(*) FROM gone GROUP BY queue
)
SELECT gone.id FROM gone;

-- name: RescueJobs :one
-- Returns up to @max_jobs jobs whose lease expired: to available (the attempt stays counted), dead
-- when out of attempts, cancelled when a cancel was asked. The error history keeps the last
-- @kept_errors attempts. Index: crawlq_job_lease; the expired rows are locked in lease order
-- (SKIP LOCKED: a rescue never waits for a worker finishing its job at the last moment).
WITH expired AS (
    SELECT id FROM crawlq_job
    WHERE state = 'running' AND lease_until < coalesce(sqlc.narg(now)::timestamptz, now())
    ORDER BY lease_until
    LIMIT sqlc.arg(max_jobs)::int
    FOR UPDATE SKIP LOCKED
), rescued AS (
UPDATE crawlq_job j
SET state = CASE WHEN j.cancel_requested THEN 'cancelled'
                 WHEN j.attempt >= j.max_attempts THEN 'dead'
                 ELSE 'available' END::crawlq_job_state,
    finished_at = CASE WHEN j.cancel_requested OR j.attempt >= j.max_attempts THEN coalesce(sqlc.narg(now)::timestamptz, now()) END,
    errors = (SELECT COALESCE(jsonb_agg(e.x ORDER BY e.n), '[]'::jsonb)
              FROM jsonb_array_elements(COALESCE(j.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
                       'attempt', j.attempt, 'at', coalesce(sqlc.narg(now)::timestamptz, now()),
                       'error', 'lease expired (worker ' || COALESCE(j.worker, '?') || ')')))
                   WITH ORDINALITY AS e(x, n)
              WHERE e.n > jsonb_array_length(COALESCE(j.errors, '[]'::jsonb)) + 1 - sqlc.arg(kept_errors)::int),
    lease_until = NULL, lease_token = NULL
WHERE j.id = ANY (ARRAY(SELECT id FROM expired))
RETURNING j.queue, j.state
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n)
    SELECT queue, state, count(*) FROM rescued GROUP BY queue, state
)
SELECT count(*) FROM rescued;

-- name: CancelJob :one
-- Cancels one job: at once when it waits, by request when it runs (its worker learns it at its
-- next heartbeat). No row: the job is finished or unknown. Index: the primary key.
WITH old AS (
    SELECT id, state FROM crawlq_job WHERE id = sqlc.arg(id)::bigint AND state IN ('available', 'scheduled', 'running') FOR UPDATE
), upd AS (
    UPDATE crawlq_job j
    SET state = CASE WHEN j.state = 'running' THEN j.state ELSE 'cancelled' END,
        cancel_requested = (j.state = 'running'),
        finished_at = CASE WHEN j.state = 'running' THEN NULL ELSE coalesce(sqlc.narg(now)::timestamptz, now()) END
    FROM old WHERE j.id = old.id
    RETURNING j.queue, j.state, old.state AS old_state
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n)
    SELECT queue, state, count(*) FROM upd WHERE state <> old_state GROUP BY queue, state
    UNION ALL
    SELECT queue, old_state, -count(*) FROM upd WHERE state <> old_state GROUP BY queue, old_state
)
SELECT upd.state FROM upd;

-- name: CancelParentJobs :one
-- Cancels every unfinished job of run @parent_id: waiting ones at once, running ones by request.
-- Index: crawlq_job_parent; rows locked in id order.
WITH old AS (
    SELECT id, state FROM crawlq_job
    WHERE parent_id = sqlc.arg(parent_id)::bigint AND state IN ('available', 'scheduled', 'running') AND NOT cancel_requested
    ORDER BY id
    FOR UPDATE
), upd AS (
    UPDATE crawlq_job j
    SET state = CASE WHEN j.state = 'running' THEN j.state ELSE 'cancelled' END,
        cancel_requested = (j.state = 'running'),
        finished_at = CASE WHEN j.state = 'running' THEN NULL ELSE coalesce(sqlc.narg(now)::timestamptz, now()) END
    FROM old WHERE j.id = old.id
    RETURNING j.queue, j.state, old.state AS old_state
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n)
    SELECT queue, state, sum(n) FROM (
        SELECT queue, state, count(*) AS n FROM upd GROUP BY queue, state
        UNION ALL
        SELECT queue, old_state, -count(*) FROM upd GROUP BY queue, old_state
    ) x
    GROUP BY queue, state HAVING sum(n) <> 0
)
SELECT count(*) FROM upd;

-- name: JobState :one
-- One job's state (to explain a failed cancel). Index: the primary key.
SELECT state FROM crawlq_job WHERE id = sqlc.arg(id)::bigint;

-- name: DeadChildren :many
-- Counts run @parent_id's dead jobs of @kind and returns the newest few with their args and last
-- error. Index: crawlq_job_parent_dead (dead jobs only, so a finished run of a million succeeded
-- pages costs nothing here).
SELECT count(*) OVER () AS total, id, args, attempt, COALESCE(errors -> -1 ->> 'error', '')::text AS last_error
FROM crawlq_job
WHERE parent_id = sqlc.arg(parent_id)::bigint AND state = 'dead' AND kind = sqlc.arg(kind)::text
ORDER BY id DESC
LIMIT sqlc.arg(max_jobs)::int;

-- name: RedriveParentJobs :one
-- Makes run @parent_id's dead jobs of @kind available again with a fresh attempt budget.
-- Index: crawlq_job_parent_dead; rows locked in id order.
WITH dead AS (
    SELECT id FROM crawlq_job WHERE parent_id = sqlc.arg(parent_id)::bigint AND state = 'dead' AND kind = sqlc.arg(kind)::text ORDER BY id FOR UPDATE
), redriven AS (
    UPDATE crawlq_job j
    SET state = 'available', attempt = 0, run_at = coalesce(sqlc.narg(now)::timestamptz, now()), finished_at = NULL,
        cancel_requested = false
    WHERE j.id = ANY (ARRAY(SELECT id FROM dead)) AND j.state = 'dead'
    RETURNING j.queue
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n)
    SELECT queue, 'available'::crawlq_job_state, count(*) FROM redriven GROUP BY queue
    UNION ALL
    SELECT queue, 'dead'::crawlq_job_state, -count(*) FROM redriven GROUP BY queue
)
SELECT count(*) FROM redriven;

-- name: RedriveJobs :many
-- Makes up to @max_jobs dead jobs of @queue (or the listed @ids) available again with a fresh
-- attempt budget. A dead job whose unique key an unfinished job now holds stays dead, and of
-- several dead jobs sharing a key only the newest is redriven. Index: crawlq_job_dead; rows locked
-- in id order, skipping those someone else holds.
WITH cand AS (
    SELECT DISTINCT ON (COALESCE(unique_key, id::text)) id
    FROM crawlq_job d
    WHERE d.state = 'dead' AND d.queue = sqlc.arg(queue)::text AND (cardinality(sqlc.arg(ids)::bigint[]) = 0 OR d.id = ANY(sqlc.arg(ids)::bigint[]))
      AND (d.unique_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM crawlq_job o
            WHERE o.queue = d.queue AND o.unique_key = d.unique_key AND o.state IN ('available', 'scheduled', 'running')))
    ORDER BY COALESCE(unique_key, id::text), id DESC
    LIMIT sqlc.arg(max_jobs)::int
), locked AS (
    SELECT id FROM crawlq_job WHERE id IN (SELECT id FROM cand) ORDER BY id FOR UPDATE SKIP LOCKED
), redriven AS (
    UPDATE crawlq_job j
    SET state = 'available', attempt = 0, run_at = coalesce(sqlc.narg(now)::timestamptz, now()), finished_at = NULL,
        cancel_requested = false
    WHERE j.id = ANY (ARRAY(SELECT id FROM locked)) AND j.state = 'dead'
    RETURNING j.id, j.queue
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n)
    SELECT queue, 'available'::crawlq_job_state, count(*) FROM redriven GROUP BY queue
    UNION ALL
    SELECT queue, 'dead'::crawlq_job_state, -count(*) FROM redriven GROUP BY queue
)
SELECT redriven.id FROM redriven;

-- name: HasUnfinishedJobs :one
-- Whether run @parent_id has a job not yet finished. Index: crawlq_job_parent.
SELECT EXISTS (SELECT 1 FROM crawlq_job WHERE parent_id = sqlc.arg(parent_id)::bigint AND state IN ('available', 'scheduled', 'running'));

-- name: ParentSettled :one
-- Whether run @parent_id is settled: it has no job that is unfinished or dead, so nothing of it can
-- run again (only dead jobs are redriven) and no job of it can be enqueued again either (see
-- DeleteOnceKeys). Indexes: crawlq_job_parent (unfinished) and crawlq_job_parent_dead.
SELECT (NOT EXISTS (SELECT 1 FROM crawlq_job WHERE parent_id = sqlc.arg(parent_id)::bigint AND state IN ('available', 'scheduled', 'running'))
   AND NOT EXISTS (SELECT 1 FROM crawlq_job WHERE parent_id = sqlc.arg(parent_id)::bigint AND state = 'dead'))::boolean AS settled;

-- name: DeleteFinishedJobsByAge :one
-- Deletes up to @max_jobs finished jobs in @states that finished more than @age_us microseconds
-- ago (the operator's retention). Index: crawlq_job_finished (per queue by finished_at), read
-- across queues. Jobs with once keys are not retention's: they go with their parent's keys
-- (DeleteOnceKeys), and crawlq_job_finished leaves them out; but a dead one would keep its parent
-- from ever settling, so it goes with the dead window once its parent has no unfinished job
-- (index: crawlq_job_parent), when nothing can enqueue for the parent but a redrive.
WITH del AS (
    DELETE FROM crawlq_job
    WHERE id IN (
        SELECT id FROM crawlq_job
        WHERE state IN ('succeeded', 'cancelled', 'dead') AND (once_h IS NULL OR state = 'dead')
          AND (once_h IS NULL OR NOT EXISTS (SELECT 1 FROM crawlq_job u WHERE u.parent_id = crawlq_job.parent_id AND u.state IN ('available', 'scheduled', 'running')))
          AND state::text = ANY(sqlc.arg(states)::text[])
          AND finished_at < coalesce(sqlc.narg(now)::timestamptz, now()) - sqlc.arg(age_us)::bigint * interval '1 microsecond'
        LIMIT sqlc.arg(max_jobs)::int
        FOR UPDATE SKIP LOCKED
    )
    RETURNING queue, state
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n) SELECT queue, state, -count(*) FROM del GROUP BY queue, state
)
SELECT count(*) FROM del;

-- name: DeleteFinishedJobsBeyond :one
-- Deletes up to @max_jobs finished jobs of @queue in @states beyond the newest @keep (the
-- operator's retention), jobs with once keys apart (see DeleteFinishedJobsByAge). Index:
-- crawlq_job_finished, read newest first.
WITH del AS (
    DELETE FROM crawlq_job
    WHERE id IN (
        SELECT id FROM crawlq_job
        WHERE queue = sqlc.arg(queue)::text AND state IN ('succeeded', 'cancelled', 'dead') AND (once_h IS NULL OR state = 'dead')
          AND (once_h IS NULL OR NOT EXISTS (SELECT 1 FROM crawlq_job u WHERE u.parent_id = crawlq_job.parent_id AND u.state IN ('available', 'scheduled', 'running')))
          AND state::text = ANY(sqlc.arg(states)::text[])
        ORDER BY finished_at DESC
        OFFSET sqlc.arg(keep)::int
        LIMIT sqlc.arg(max_jobs)::int
        FOR UPDATE SKIP LOCKED
    )
    RETURNING queue, state
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n) SELECT queue, state, -count(*) FROM del GROUP BY queue, state
)
SELECT count(*) FROM del;

-- name: PurgeFinishedJobs :one
-- Automatic maintenance (internal/maintain): deletes up to @max_jobs finished jobs of @queue,
-- succeeded ones that finished before @succeeded_before, cancelled ones before @cancelled_before,
-- dead ones before @dead_before (the caller gives a time before any job for a state it keeps),
-- jobs with once keys apart (see DeleteFinishedJobsByAge).
-- Index: crawlq_job_finished, a range scan of (queue, finished_at) up to the latest of the three
-- cutoffs, so a batch reads what it deletes plus the younger dead or cancelled rows under that
-- cutoff, never the whole table (DeleteFinishedJobsByAge reads across queues and may scan). SKIP
-- LOCKED: a purge never waits for anyone.
WITH del AS (
    DELETE FROM crawlq_job
    WHERE id = ANY (ARRAY(
        SELECT id FROM crawlq_job
        WHERE queue = sqlc.arg(queue)::text AND state IN ('succeeded', 'cancelled', 'dead') AND (once_h IS NULL OR state = 'dead')
          AND (once_h IS NULL OR NOT EXISTS (SELECT 1 FROM crawlq_job u WHERE u.parent_id = crawlq_job.parent_id AND u.state IN ('available', 'scheduled', 'running')))
          AND finished_at < GREATEST(sqlc.arg(succeeded_before)::timestamptz, sqlc.arg(cancelled_before)::timestamptz, sqlc.arg(dead_before)::timestamptz)
          AND finished_at < CASE state WHEN 'succeeded' THEN sqlc.arg(succeeded_before)::timestamptz
                                       WHEN 'cancelled' THEN sqlc.arg(cancelled_before)::timestamptz
                                       ELSE sqlc.arg(dead_before)::timestamptz END
        ORDER BY finished_at
        LIMIT sqlc.arg(max_jobs)::int
        FOR UPDATE SKIP LOCKED
    ))
    RETURNING queue, state
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n) SELECT queue, state, -count(*) FROM del GROUP BY queue, state
)
SELECT count(*) FROM del;

-- name: OldestAvailable :one
-- The oldest run_at among @queue's available jobs, without scanning them: a loose index scan over
-- crawlq_job_claim visits each distinct priority once and reads the first entry under it (the
-- index is ordered by run_at within a priority). No available job: the zero time (Go's).
WITH RECURSIVE p AS (
    (SELECT priority FROM crawlq_job WHERE state = 'available' AND queue = sqlc.arg(queue)::text ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT priority FROM crawlq_job
            WHERE state = 'available' AND queue = sqlc.arg(queue)::text AND priority < p.priority
            ORDER BY priority DESC LIMIT 1)
    FROM p WHERE p.priority IS NOT NULL
)
SELECT COALESCE(min((SELECT run_at FROM crawlq_job
                     WHERE state = 'available' AND queue = sqlc.arg(queue)::text AND priority = p.priority
                     ORDER BY run_at LIMIT 1)), '0001-01-01 00:00:00+00')::timestamptz AS oldest
FROM p WHERE p.priority IS NOT NULL;

-- name: DueScheduled :many
-- Per queue, the delayed jobs that are due but not yet promoted, and the oldest of them, with the
-- time they were judged at. Index: crawlq_job_scheduled; the range is small while promotion keeps up.
SELECT queue, count(*) AS n, min(run_at)::timestamptz AS oldest FROM crawlq_job
WHERE state = 'scheduled' AND run_at <= coalesce(sqlc.narg(now)::timestamptz, now())
GROUP BY queue;

-- name: DatabaseNow :one
-- The time the statements act at: @now, or the database's clock.
SELECT coalesce(sqlc.narg(now)::timestamptz, now())::timestamptz AS now;

-- name: GetJob :one
-- One job. Index: the primary key.
SELECT id, queue, kind, state, priority, run_at, attempt, max_attempts, lease_until, lease_token, worker, unique_key,
       parent_id, cancel_requested, args, errors, created_at, started_at, finished_at, prev_state, once_h
FROM crawlq_job WHERE id = sqlc.arg(id)::bigint;

-- name: ListJobs :many
-- Jobs newest first with optional filters ('' / empty / 0: any); @before is a keyset cursor (ids
-- below it, 0: from the newest). Index: the primary key, read backwards.
SELECT id, queue, kind, state, priority, run_at, attempt, max_attempts, lease_until, lease_token, worker, unique_key,
       parent_id, cancel_requested, args, errors, created_at, started_at, finished_at, prev_state, once_h
FROM crawlq_job
WHERE (sqlc.arg(queue)::text = '' OR queue = sqlc.arg(queue)::text)
  AND (cardinality(sqlc.arg(states)::text[]) = 0 OR state::text = ANY(sqlc.arg(states)::text[]))
  AND (sqlc.arg(kind)::text = '' OR kind = sqlc.arg(kind)::text)
  AND (sqlc.arg(parent_id)::bigint = 0 OR parent_id = sqlc.arg(parent_id)::bigint)
  AND (sqlc.arg(before)::bigint = 0 OR id < sqlc.arg(before)::bigint)
ORDER BY id DESC
LIMIT sqlc.arg(max_jobs)::int;

-- name: RunJobDepth :one
-- Counts a live run's waiting and running page jobs (what `crawlq run --watch` shows as its
-- queue depth; read by internal/events). Index: crawlq_job_parent, whose predicate is these states.
SELECT count(*) FILTER (WHERE state IN ('available', 'scheduled')) AS waiting,
       count(*) FILTER (WHERE state = 'running') AS running
FROM crawlq_job WHERE parent_id = @parent_id::bigint AND state IN ('available', 'scheduled', 'running');

-- name: NextScheduledAt :one
-- When the soonest delayed job (a delayed schedule, a snoozed or retried job) comes due; no row
-- when none waits. crawlq local wakes dispatch then rather than at its next tick. Index:
-- crawlq_job_scheduled (its first entry).
SELECT run_at FROM crawlq_job WHERE state = 'scheduled' ORDER BY run_at LIMIT 1;
