package queue

// Every query on crawlq_job, crawlq_job_count, crawlq_job_count_delta and crawlq_worker.
// Statements that end with countDelta are variables only because a Go constant cannot call a
// function; nothing assigns them after initialisation.
// The table and its indexes are defined in internal/migrate/migrations/0001_queue.sql; each
// comment below names the index a query relies on.

// countDelta returns the CTE that records a statement's effect on the per-queue state counts:
// every row of src (columns queue and state: the new state) moved from the state oldState (a
// column of src or a constant) to its new one. Each state-changing statement below ends with it,
// so the counts stay exact without triggers and without a counter row that workers contend on.
func countDelta(src, oldState string) string {
	return `cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n)
    SELECT queue, state, sum(n) FROM (
        SELECT queue, state, count(*) AS n FROM ` + src + ` GROUP BY queue, state
        UNION ALL
        SELECT queue, ` + oldState + `, -count(*) FROM ` + src + ` GROUP BY queue, ` + oldState + `
    ) x
    GROUP BY queue, state HAVING sum(n) <> 0
)`
}

// unfinished is the SQL list of states whose jobs still hold their unique key.
const unfinished = `('available', 'scheduled', 'running')`

// jobColumns is the column list scanned by scanJob.
const jobColumns = `id, queue, kind, state, args, priority, run_at, attempt, max_attempts, lease_until,
	COALESCE(lease_token, 0), COALESCE(worker, ''), COALESCE(unique_key, ''), COALESCE(parent_id, 0),
	cancel_requested, errors, created_at, started_at, finished_at`

// sqlInsert inserts a batch given as parallel arrays in one round trip. A job whose run_at is
// still in the future starts as 'scheduled'. Times use the database clock (now()) so that
// workers with skewed clocks agree. %s is the ON CONFLICT action for the batch's duplicate mode.
// RETURNING reports (xmax <> 0) for rows that took the conflict path: an inserted row has no xmax;
// those rows also report the state they had (prev_state) for the count delta.
var sqlInsert = `
WITH ins AS (
INSERT INTO crawlq_job (queue, kind, state, priority, run_at, max_attempts, unique_key, parent_id, args)
SELECT q, k, (CASE WHEN r <= now() THEN 'available' ELSE 'scheduled' END)::crawlq_job_state, p, r, m,
       NULLIF(u, ''), NULLIF(par, 0), a::jsonb
FROM (
    SELECT q, k, p, COALESCE(NULLIF(ra, '0001-01-01 00:00:00+00'::timestamptz), now() + d * interval '1 microsecond') AS r,
           m, u, par, a, o
    FROM unnest($1::text[], $2::text[], $3::smallint[], $4::timestamptz[], $5::bigint[], $6::int[], $7::text[], $8::bigint[], $9::text[])
         WITH ORDINALITY AS t(q, k, p, ra, d, m, u, par, a, o)
) s
ORDER BY o
ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND state IN ` + unfinished + `
DO UPDATE SET %s, prev_state = crawlq_job.state
RETURNING id, (xmax <> 0) AS dup, COALESCE(unique_key, '') AS key, queue, state, prev_state
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n)
    SELECT queue, state, sum(n) FROM (
        SELECT queue, state, count(*) AS n FROM ins GROUP BY queue, state
        UNION ALL
        SELECT queue, prev_state, -count(*) FROM ins WHERE dup GROUP BY queue, prev_state
    ) x
    GROUP BY queue, state HAVING sum(n) <> 0
)
SELECT id, dup, key FROM ins`

// onceCTEs are the first CTEs of the statements that insert jobs with once keys: src is the
// jobs ($N::uuid[] holds the MD5 of each once key, NULL for none), once records the keys not
// used before and returns them. A job with a once key goes on only if its key is in once.
const onceCTE = `once AS (
    INSERT INTO crawlq_job_once (parent_id, h)
    SELECT par, h FROM src WHERE h IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING parent_id, h
)`

// sqlInsertOnce inserts jobs without unique keys, skipping those whose once key was used before,
// and at most $10 of them (0: all), the first in order. Index: crawlq_job_once's primary key.
// It returns the id and the 1-based position in the input of each job it inserted: RETURNING
// keeps the insertion order (ORDER BY o), and both sides are numbered in that order.
var sqlInsertOnce = `
WITH src AS (
    SELECT q, k, p, COALESCE(NULLIF(ra, '0001-01-01 00:00:00+00'::timestamptz), now() + d * interval '1 microsecond') AS r,
           m, par, a, h, o
    FROM unnest($1::text[], $2::text[], $3::smallint[], $4::timestamptz[], $5::bigint[], $6::int[], $7::bigint[], $8::text[], $9::uuid[])
         WITH ORDINALITY AS t(q, k, p, ra, d, m, par, a, h, o)
), ` + onceCTE + `, pick AS (
    SELECT src.* FROM src
    WHERE src.h IS NULL OR EXISTS (SELECT 1 FROM once WHERE once.parent_id = src.par AND once.h = src.h)
    ORDER BY src.o
    LIMIT NULLIF($10::int, 0)
), ins AS (
    INSERT INTO crawlq_job (queue, kind, state, priority, run_at, max_attempts, parent_id, args)
    SELECT q, k, (CASE WHEN r <= now() THEN 'available' ELSE 'scheduled' END)::crawlq_job_state, p, r, m,
           NULLIF(par, 0), a::jsonb
    FROM pick ORDER BY o
    RETURNING id, queue, state
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n)
    SELECT queue, state, count(*) FROM ins GROUP BY queue, state
)
SELECT i.id, p.o FROM (SELECT id, row_number() OVER () AS n FROM ins) i
JOIN (SELECT o, row_number() OVER (ORDER BY o) AS n FROM pick) p USING (n)`

// sqlInsertHeld inserts jobs that start out running, leased to worker $9 with token $8 for $7
// milliseconds: work a process found for itself and hands to its own idle handlers, skipping the
// claim (Reservation). They count as running from the start. Jobs whose once key ($10) was used
// before are skipped.
var sqlInsertHeld = `
WITH src AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::smallint[], $4::int[], $5::bigint[], $6::text[], $10::uuid[])
         WITH ORDINALITY AS t(q, k, p, m, par, a, h, o)
), ` + onceCTE + `, ins AS (
INSERT INTO crawlq_job (queue, kind, state, priority, run_at, max_attempts, parent_id, args,
                        attempt, lease_until, lease_token, worker, started_at)
SELECT q, k, 'running', p, now(), m, NULLIF(par, 0), a::jsonb,
       1, now() + $7::bigint * interval '1 millisecond', $8, $9, now()
FROM src
WHERE src.h IS NULL OR EXISTS (SELECT 1 FROM once WHERE once.parent_id = src.par AND once.h = src.h)
ORDER BY o
RETURNING id, kind, args, priority, run_at, attempt, max_attempts, lease_until, COALESCE(parent_id, 0) AS parent_id,
          created_at, started_at, queue, state
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n)
    SELECT queue, state, count(*) FROM ins GROUP BY queue, state
)
SELECT id, kind, args, priority, run_at, attempt, max_attempts, lease_until, parent_id, created_at, started_at FROM ins`

// sqlCopyDelta records the count change of a COPY of n plain jobs into queue $1.
const sqlCopyDelta = `INSERT INTO crawlq_job_count_delta (queue, state, n) VALUES ($1, 'available', $2)`

// sqlRecount rebuilds the counts from the job rows (repair after changes made outside this
// package). It counts every row, so it is for maintenance, not for stats. Client.Recount runs the
// three statements in one REPEATABLE READ transaction: with one snapshot, a delta committed
// meanwhile is either counted in the rows and deleted, or neither.
var sqlRecount = []string{
	`DELETE FROM crawlq_job_count_delta`,
	`DELETE FROM crawlq_job_count`,
	`INSERT INTO crawlq_job_count (queue, state, n) SELECT queue, state, count(*) FROM crawlq_job GROUP BY queue, state`,
}

// sqlNextIDs draws ids for the COPY path from the identity sequence of crawlq_job.id.
const sqlNextIDs = `SELECT nextval(pg_get_serial_sequence('crawlq_job', 'id')) FROM generate_series(1, $1::int)`

// The conflict actions. A running duplicate is left as it is in every mode: moving the run_at of a
// job that is already running would mean nothing. Keep rewrites a column with its own value so
// the row is returned (an unchanged indexed value keeps the update HOT).
const (
	onConflictKeep    = `run_at = crawlq_job.run_at`
	onConflictReplace = `
    run_at   = CASE WHEN crawlq_job.state = 'running' THEN crawlq_job.run_at ELSE EXCLUDED.run_at END,
    priority = CASE WHEN crawlq_job.state = 'running' THEN crawlq_job.priority ELSE EXCLUDED.priority END,
    state    = CASE WHEN crawlq_job.state = 'running' THEN crawlq_job.state ELSE EXCLUDED.state END`
	onConflictEarliest = `
    run_at = LEAST(crawlq_job.run_at, EXCLUDED.run_at),
    state  = CASE WHEN crawlq_job.state = 'running' THEN crawlq_job.state
                  WHEN LEAST(crawlq_job.run_at, EXCLUDED.run_at) <= now() THEN 'available'::crawlq_job_state
                  ELSE 'scheduled'::crawlq_job_state END`
)

// sqlClaim leases up to $2 due jobs of queue $1, highest priority first, then oldest run_at.
// Index: crawlq_job_claim (only available rows, in exactly this order), so the scan stops after
// $2 rows however deep the backlog. SKIP LOCKED lets concurrent claimers pass each other.
// "id = ANY (ARRAY(...))" makes the update find the picked rows through the primary key; a join
// with the CTE lets the planner choose a hash join over a scan of the whole table.
var sqlClaim = `
WITH picked AS (
    SELECT id FROM crawlq_job
    WHERE state = 'available' AND queue = $1
    ORDER BY priority DESC, run_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), claimed AS (
UPDATE crawlq_job j
SET state = 'running', attempt = j.attempt + 1, lease_until = now() + $3::bigint * interval '1 millisecond',
    lease_token = $4, worker = $5, started_at = now()
WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
RETURNING j.id, j.kind, j.args, j.priority, j.run_at, j.attempt, j.max_attempts, j.lease_until,
          COALESCE(j.unique_key, '') AS unique_key, COALESCE(j.parent_id, 0) AS parent_id, j.cancel_requested,
          j.created_at, j.started_at, j.queue, j.state
), ` + countDelta("claimed", "'available'::crawlq_job_state") + `
SELECT id, kind, args, priority, run_at, attempt, max_attempts, lease_until, unique_key, parent_id,
       cancel_requested, created_at, started_at FROM claimed`

// sqlPromote makes delayed jobs that are now due available. Index: crawlq_job_scheduled.
var sqlPromote = `
WITH due AS (
    SELECT id FROM crawlq_job
    WHERE state = 'scheduled' AND run_at <= now()
    ORDER BY run_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), promoted AS (
    UPDATE crawlq_job j SET state = 'available' WHERE j.id = ANY (ARRAY(SELECT id FROM due))
    RETURNING j.queue, j.state
), ` + countDelta("promoted", "'scheduled'::crawlq_job_state") + `
SELECT count(*) FROM promoted`

// sqlHeartbeat extends the leases still held (id and token match a running job) and reports
// which of them have been asked to cancel. Leases not returned are lost.
const sqlHeartbeat = `
UPDATE crawlq_job j
SET lease_until = now() + $3::bigint * interval '1 millisecond'
FROM unnest($1::bigint[], $2::bigint[]) AS l(id, token)
WHERE j.id = l.id AND j.lease_token = l.token AND j.state = 'running'
RETURNING j.id, j.lease_token, j.cancel_requested`

// sqlComplete finishes held jobs. A job asked to cancel while it ran still counts as succeeded:
// its work was done.
var sqlComplete = `
WITH done AS (
    UPDATE crawlq_job j
    SET state = 'succeeded', finished_at = now(), lease_until = NULL, lease_token = NULL
    FROM unnest($1::bigint[], $2::bigint[]) AS l(id, token)
    WHERE j.id = l.id AND j.lease_token = l.token AND j.state = 'running'
    RETURNING j.id, l.token, j.queue, j.state
), ` + countDelta("done", "'running'::crawlq_job_state") + `
SELECT id, token FROM done`

// sqlCompleteAll is sqlComplete for a caller that commits in the same round trip: when a lease
// was lost it raises CQ001 (crawlq_lease_lost), aborting the transaction, instead of reporting.
var sqlCompleteAll = `
WITH done AS (
    UPDATE crawlq_job j
    SET state = 'succeeded', finished_at = now(), lease_until = NULL, lease_token = NULL
    FROM unnest($1::bigint[], $2::bigint[]) AS l(id, token)
    WHERE j.id = l.id AND j.lease_token = l.token AND j.state = 'running'
    RETURNING j.id, j.queue, j.state
), ` + countDelta("done", "'running'::crawlq_job_state") + `
SELECT crawlq_lease_lost(array_agg(l.id)) FROM unnest($1::bigint[]) AS l(id)
WHERE l.id NOT IN (SELECT id FROM done)
HAVING count(*) > 0`

// sqlFail records a failed attempt. $3 is the retry delay in microseconds, chosen by the client
// (backoff with jitter, or the server's Retry-After); $5 forces the job dead. A job asked to
// cancel becomes cancelled rather than retried. The error history keeps the last 20 attempts.
var sqlFail = `
WITH failed AS (
UPDATE crawlq_job j
SET state = CASE
        WHEN j.cancel_requested THEN 'cancelled'
        WHEN $5 OR j.attempt >= j.max_attempts THEN 'dead'
        WHEN $3::bigint <= 0 THEN 'available'
        ELSE 'scheduled' END::crawlq_job_state,
    run_at = CASE WHEN $3::bigint > 0 THEN now() + $3::bigint * interval '1 microsecond' ELSE j.run_at END,
    finished_at = CASE WHEN j.cancel_requested OR $5 OR j.attempt >= j.max_attempts THEN now() END,
    lease_until = NULL, lease_token = NULL,
    errors = (SELECT CASE WHEN jsonb_array_length(e) > 20 THEN e - 0 ELSE e END
              FROM (SELECT COALESCE(j.errors, '[]'::jsonb) ||
                           jsonb_build_array(jsonb_build_object('attempt', j.attempt, 'at', now(), 'error', $4::text)) AS e) x)
WHERE j.id = $1 AND j.lease_token = $2 AND j.state = 'running'
RETURNING j.state, j.run_at, j.queue
), ` + countDelta("failed", "'running'::crawlq_job_state") + `
SELECT state, run_at FROM failed`

// sqlSnooze puts a held job back to wait $3 microseconds without counting the attempt.
// With $3 = 0 it is a release: the job is available again at its old place in line.
var sqlSnooze = `
WITH back AS (
UPDATE crawlq_job j
SET state = CASE WHEN j.cancel_requested THEN 'cancelled'
                 WHEN $3::bigint <= 0 THEN 'available' ELSE 'scheduled' END::crawlq_job_state,
    run_at = CASE WHEN $3::bigint > 0 THEN now() + $3::bigint * interval '1 microsecond' ELSE j.run_at END,
    finished_at = CASE WHEN j.cancel_requested THEN now() END,
    attempt = GREATEST(j.attempt - 1, 0), lease_until = NULL, lease_token = NULL
FROM unnest($1::bigint[], $2::bigint[]) AS l(id, token)
WHERE j.id = l.id AND j.lease_token = l.token AND j.state = 'running'
RETURNING j.id, l.token, j.queue, j.state
), ` + countDelta("back", "'running'::crawlq_job_state") + `
SELECT id, token FROM back`

// sqlCancelHeld ends a held job as cancelled (its handler found its run cancelled), recording why.
var sqlCancelHeld = `
WITH gone AS (
UPDATE crawlq_job j
SET state = 'cancelled', finished_at = now(), lease_until = NULL, lease_token = NULL,
    errors = COALESCE(j.errors, '[]'::jsonb) ||
             jsonb_build_array(jsonb_build_object('attempt', j.attempt, 'at', now(), 'error', $3::text))
WHERE j.id = $1 AND j.lease_token = $2 AND j.state = 'running'
RETURNING j.id, j.queue, j.state
), ` + countDelta("gone", "'running'::crawlq_job_state") + `
SELECT id FROM gone`

// sqlDeadChildren counts a run's dead jobs of one kind and returns the newest few with their args
// and last error. Index: crawlq_job_parent_dead (dead jobs only, so a finished run of a million
// succeeded pages costs nothing here).
const sqlDeadChildren = `
SELECT count(*) OVER (), id, args, attempt, COALESCE(errors -> -1 ->> 'error', '')
FROM crawlq_job
WHERE parent_id = $1 AND state = 'dead' AND kind = $2
ORDER BY id DESC
LIMIT $3`

// sqlRedriveParent makes a run's dead jobs of one kind available again with a fresh attempt budget.
// Index: crawlq_job_parent_dead.
var sqlRedriveParent = `
WITH redriven AS (
    UPDATE crawlq_job j
    SET state = 'available', attempt = 0, run_at = now(), finished_at = NULL, cancel_requested = false
    WHERE j.parent_id = $1 AND j.state = 'dead' AND j.kind = $2
    RETURNING j.id, j.queue, j.state
), ` + countDelta("redriven", "'dead'::crawlq_job_state") + `
SELECT count(*) FROM redriven`

// sqlHasUnfinished says whether a run has a job not yet finished. Index: crawlq_job_parent.
const sqlHasUnfinished = `SELECT EXISTS (SELECT 1 FROM crawlq_job WHERE parent_id = $1 AND state IN ` + unfinished + `)`

// sqlRescue returns jobs whose lease expired: to available (the attempt stays counted), dead when
// out of attempts, cancelled when a cancel was asked. Index: crawlq_job_lease.
var sqlRescue = `
WITH expired AS (
    SELECT id FROM crawlq_job
    WHERE state = 'running' AND lease_until < now()
    ORDER BY lease_until
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), rescued AS (
UPDATE crawlq_job j
SET state = CASE WHEN j.cancel_requested THEN 'cancelled'
                 WHEN j.attempt >= j.max_attempts THEN 'dead'
                 ELSE 'available' END::crawlq_job_state,
    finished_at = CASE WHEN j.cancel_requested OR j.attempt >= j.max_attempts THEN now() END,
    errors = COALESCE(j.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
        'attempt', j.attempt, 'at', now(), 'error', 'lease expired (worker ' || COALESCE(j.worker, '?') || ')')),
    lease_until = NULL, lease_token = NULL
WHERE j.id = ANY (ARRAY(SELECT id FROM expired))
RETURNING j.id, j.queue, j.state
), ` + countDelta("rescued", "'running'::crawlq_job_state") + `
SELECT count(*) FROM rescued`

// sqlCancel cancels one job: at once when it waits, by request when it runs.
var sqlCancel = `
WITH old AS (
    SELECT id, state FROM crawlq_job WHERE id = $1 AND state IN ` + unfinished + ` FOR UPDATE
), upd AS (
    UPDATE crawlq_job j
    SET state = CASE WHEN j.state = 'running' THEN j.state ELSE 'cancelled' END,
        cancel_requested = (j.state = 'running'),
        finished_at = CASE WHEN j.state = 'running' THEN NULL ELSE now() END
    FROM old WHERE j.id = old.id
    RETURNING j.queue, j.state, old.state AS old_state
), ` + countDelta("upd", "old_state") + `
SELECT state FROM upd`

// sqlCancelParent cancels every unfinished job of a run. Index: crawlq_job_parent.
var sqlCancelParent = `
WITH old AS (
    SELECT id, state FROM crawlq_job
    WHERE parent_id = $1 AND state IN ` + unfinished + ` AND NOT cancel_requested
    FOR UPDATE
), upd AS (
    UPDATE crawlq_job j
    SET state = CASE WHEN j.state = 'running' THEN j.state ELSE 'cancelled' END,
        cancel_requested = (j.state = 'running'),
        finished_at = CASE WHEN j.state = 'running' THEN NULL ELSE now() END
    FROM old WHERE j.id = old.id
    RETURNING j.queue, j.state, old.state AS old_state
), ` + countDelta("upd", "old_state") + `
SELECT count(*) FROM upd`

// sqlJobState reads one job's state (to explain a failed cancel).
const sqlJobState = `SELECT state FROM crawlq_job WHERE id = $1`

// sqlRedrive makes up to $3 dead jobs of queue $1 (or the listed ids $2) available again with a
// fresh attempt budget. A dead job whose unique key an unfinished job now holds stays dead, and of
// several dead jobs sharing a key only the newest is redriven. Index: crawlq_job_dead.
var sqlRedrive = `
WITH cand AS (
    SELECT DISTINCT ON (COALESCE(unique_key, id::text)) id
    FROM crawlq_job d
    WHERE d.state = 'dead' AND d.queue = $1 AND (cardinality($2::bigint[]) = 0 OR d.id = ANY($2))
      AND (d.unique_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM crawlq_job o
            WHERE o.queue = d.queue AND o.unique_key = d.unique_key AND o.state IN ` + unfinished + `))
    ORDER BY COALESCE(unique_key, id::text), id DESC
    LIMIT $3
), locked AS (
    SELECT id FROM crawlq_job WHERE id IN (SELECT id FROM cand) FOR UPDATE SKIP LOCKED
), redriven AS (
    UPDATE crawlq_job j
    SET state = 'available', attempt = 0, run_at = now(), finished_at = NULL, cancel_requested = false
    WHERE j.id = ANY (ARRAY(SELECT id FROM locked)) AND j.state = 'dead'
    RETURNING j.id, j.queue, j.state
), ` + countDelta("redriven", "'dead'::crawlq_job_state") + `
SELECT id FROM redriven`

// sqlRetentionAge deletes up to $3 finished jobs that finished before now() - $1 microseconds,
// in states $2. Index: crawlq_job_finished (per queue by finished_at), read across queues.
var sqlRetentionAge = `
WITH del AS (
    DELETE FROM crawlq_job
    WHERE id IN (
        SELECT id FROM crawlq_job
        WHERE state IN ('succeeded', 'cancelled', 'dead') AND state = ANY($2::crawlq_job_state[])
          AND finished_at < now() - $1::bigint * interval '1 microsecond'
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    )
    RETURNING queue, state
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n) SELECT queue, state, -count(*) FROM del GROUP BY queue, state
)
SELECT count(*) FROM del`

// sqlRetentionKeep deletes up to $4 finished jobs of queue $1 in states $2 beyond the newest $3.
// Index: crawlq_job_finished, read newest first.
var sqlRetentionKeep = `
WITH del AS (
    DELETE FROM crawlq_job
    WHERE id IN (
        SELECT id FROM crawlq_job
        WHERE queue = $1 AND state IN ('succeeded', 'cancelled', 'dead') AND state = ANY($2::crawlq_job_state[])
        ORDER BY finished_at DESC
        OFFSET $3
        LIMIT $4
        FOR UPDATE SKIP LOCKED
    )
    RETURNING queue, state
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n) SELECT queue, state, -count(*) FROM del GROUP BY queue, state
)
SELECT count(*) FROM del`

// sqlFoldCounts moves the per-statement count deltas into the totals. Concurrent folds are safe:
// a delta row is deleted, and so counted, by one fold only; totals are updated in key order so two
// folds never deadlock.
const sqlFoldCounts = `
WITH d AS (DELETE FROM crawlq_job_count_delta RETURNING queue, state, n),
     s AS (SELECT queue, state, sum(n)::bigint AS n FROM d GROUP BY queue, state)
INSERT INTO crawlq_job_count AS c (queue, state, n)
SELECT queue, state, n FROM s ORDER BY queue, state
ON CONFLICT (queue, state) DO UPDATE SET n = c.n + EXCLUDED.n`

// sqlCounts reads the totals plus the deltas not yet folded: no job row is counted.
const sqlCounts = `
SELECT queue, state::text, sum(n)::bigint FROM (
    SELECT queue, state, n FROM crawlq_job_count
    UNION ALL
    SELECT queue, state, n FROM crawlq_job_count_delta
) x GROUP BY queue, state`

// sqlOldestAvailable finds the oldest run_at among a queue's available jobs without scanning them:
// a loose index scan over crawlq_job_claim visits each distinct priority once and reads the first
// entry under it (the index is ordered by run_at within a priority).
const sqlOldestAvailable = `
WITH RECURSIVE p AS (
    (SELECT priority FROM crawlq_job WHERE state = 'available' AND queue = $1 ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT priority FROM crawlq_job
            WHERE state = 'available' AND queue = $1 AND priority < p.priority
            ORDER BY priority DESC LIMIT 1)
    FROM p WHERE p.priority IS NOT NULL
)
SELECT min((SELECT run_at FROM crawlq_job
            WHERE state = 'available' AND queue = $1 AND priority = p.priority
            ORDER BY run_at LIMIT 1))
FROM p WHERE p.priority IS NOT NULL`

// sqlDueScheduled counts delayed jobs that are due but not yet promoted, and the oldest of them,
// per queue. Index: crawlq_job_scheduled; the range is small while promotion keeps up.
const sqlDueScheduled = `
SELECT queue, count(*), min(run_at) FROM crawlq_job
WHERE state = 'scheduled' AND run_at <= now()
GROUP BY queue`

// sqlGet reads one job.
const sqlGet = `SELECT ` + jobColumns + ` FROM crawlq_job WHERE id = $1`

// sqlList lists jobs newest first with optional filters; $6 is a keyset cursor (ids below it).
const sqlList = `
SELECT ` + jobColumns + ` FROM crawlq_job
WHERE ($1::text = '' OR queue = $1)
  AND (cardinality($2::crawlq_job_state[]) = 0 OR state = ANY($2))
  AND ($3::text = '' OR kind = $3)
  AND ($4::bigint = 0 OR parent_id = $4)
  AND ($6::bigint = 0 OR id < $6)
ORDER BY id DESC
LIMIT $5`

// sqlWorkerBeat registers a worker or refreshes its heartbeat. Index: the primary key.
const sqlWorkerBeat = `
INSERT INTO crawlq_worker (id, queue, kind, jobs_done) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET seen_at = now(), jobs_done = EXCLUDED.jobs_done`

// sqlWorkerGone removes a worker that stopped cleanly.
const sqlWorkerGone = `DELETE FROM crawlq_worker WHERE id = $1`

// sqlLiveWorkers counts workers seen within $2 microseconds, per queue and kind, optionally
// for one queue. Index: crawlq_worker_seen.
const sqlLiveWorkers = `
SELECT queue, kind, count(*) FROM crawlq_worker
WHERE ($1::text = '' OR queue = $1) AND seen_at > now() - $2::bigint * interval '1 microsecond'
GROUP BY queue, kind`

// sqlPruneWorkers forgets workers not seen for $1 microseconds (they died without saying so).
const sqlPruneWorkers = `DELETE FROM crawlq_worker WHERE seen_at < now() - $1::bigint * interval '1 microsecond'`
