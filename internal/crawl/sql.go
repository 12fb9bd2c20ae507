package crawl

// Every query on crawlq_run, crawlq_run_stat, crawlq_robots and crawlq_domain.
// The tables and indexes are in internal/migrate/migrations/0002_crawl.sql. Jobs are reached only
// through internal/queue.

const runColumns = `id, spider, args, settings, priority, queue, state::text, COALESCE(idempotency_key, ''),
	cancel_requested, COALESCE(error, ''), created_at, run_at, started_at, finished_at,
	pages, items, bytes, errors, retries, errors_by_kind, dead_pages, failed_pages`

// sqlInsertRun creates a run; with an idempotency key already held by an unfinished run of the same
// spider it returns that run instead ((xmax <> 0) marks the conflict path).
const sqlInsertRun = `
INSERT INTO crawlq_run (spider, args, settings, priority, queue, idempotency_key, page_budget, run_at, max_dead_share)
VALUES ($1, $2::jsonb, $3::jsonb, $4, $5, NULLIF($6, ''), NULLIF($7::bigint, 0),
        COALESCE(NULLIF($8::timestamptz, '0001-01-01 00:00:00+00'), now() + $9::bigint * interval '1 microsecond'), $10)
ON CONFLICT (spider, idempotency_key) WHERE idempotency_key IS NOT NULL AND state IN ('pending', 'running')
DO UPDATE SET spider = EXCLUDED.spider
RETURNING id, (xmax <> 0), state::text, run_at`

// sqlMoveRun moves a pending run's start time (a duplicate schedule in replace mode).
const sqlMoveRun = `UPDATE crawlq_run SET run_at = $2, priority = $3 WHERE id = $1 AND state = 'pending'`

const sqlGetRun = `SELECT ` + runColumns + ` FROM crawlq_run WHERE id = $1`

// sqlListRuns lists runs newest first, optionally by spider and state group.
const sqlListRuns = `
SELECT ` + runColumns + ` FROM crawlq_run
WHERE ($1::text = '' OR spider = $1)
  AND (cardinality($2::crawlq_run_state[]) = 0 OR state = ANY($2))
  AND ($4::bigint = 0 OR id < $4)
ORDER BY id DESC LIMIT $3`

// sqlStartRun marks a run running when its run job starts it.
const sqlStartRun = `
UPDATE crawlq_run SET state = 'running', started_at = COALESCE(started_at, now())
WHERE id = $1 AND state IN ('pending', 'running')`

// sqlRunError records why a run cannot proceed (it finishes as failed).
const sqlRunError = `UPDATE crawlq_run SET error = $2 WHERE id = $1`

// sqlRequestCancel marks an unfinished run for cancellation.
const sqlRequestCancel = `
UPDATE crawlq_run SET cancel_requested = true
WHERE id = $1 AND state IN ('pending', 'running')
RETURNING id`

// sqlRunState reads a run's state and cancel flag (page jobs check them).
const sqlRunState = `SELECT state::text, cancel_requested FROM crawlq_run WHERE id = $1`

// sqlFinishRun finishes a run exactly once: the state predicate makes a second caller match nothing.
// Stats are folded from crawlq_run_stat. The caller has checked, through the queue, that the run has
// no unfinished job; none can appear afterwards, because only a running job of the run adds more.
// $2 is the number of the run's dead pages and $3 a sample of them (JSON); $4 the items its sink
// holds (-1: unknown, use the items its pages yielded). The outcome (see the Run states):
// cancelled when asked; failed when the run job failed, when nothing was fetched but pages died or
// erred, or when the dead share passes max_dead_share; incomplete when any page died; else
// succeeded.
const sqlFinishRun = `
WITH s AS (
    SELECT COALESCE(sum(pages), 0) AS pages, COALESCE(sum(items), 0) AS items, COALESCE(sum(bytes), 0) AS bytes,
           COALESCE(sum(errors), 0) AS errors, COALESCE(sum(retries), 0) AS retries
    FROM crawlq_run_stat WHERE run_id = $1
), k AS (
    SELECT COALESCE(jsonb_object_agg(kind, n), '{}'::jsonb) AS by_kind
    FROM (SELECT kind, sum(n) AS n FROM crawlq_run_stat WHERE run_id = $1 AND kind IS NOT NULL GROUP BY kind) x
), o AS (
    SELECT CASE
        WHEN r.cancel_requested THEN 'cancelled'
        WHEN r.error IS NOT NULL OR r.started_at IS NULL THEN 'failed'
        WHEN s.pages = 0 AND ($2::bigint > 0 OR s.errors > 0) THEN 'failed'
        WHEN $2::bigint > 0 AND $2::float8 / ($2::bigint + s.pages) > r.max_dead_share THEN 'failed'
        WHEN $2::bigint > 0 THEN 'incomplete'
        ELSE 'succeeded' END AS state
    FROM crawlq_run r, s WHERE r.id = $1
)
UPDATE crawlq_run r
SET state = o.state::crawlq_run_state,
    error = CASE
        WHEN r.error IS NOT NULL OR o.state = 'cancelled' THEN r.error
        WHEN r.started_at IS NULL THEN 'the run job failed before starting the crawl'
        WHEN $2::bigint > 0 THEN format('%s of %s pages died after their retries (see failed_pages); crawlq redrive --run %s retries them',
                                        $2::bigint, $2::bigint + s.pages, r.id)
        ELSE r.error END,
    finished_at = now(), pages = s.pages, items = CASE WHEN $4::bigint >= 0 THEN $4::bigint ELSE s.items END,
    bytes = s.bytes, errors = s.errors, retries = s.retries, errors_by_kind = k.by_kind,
    dead_pages = $2::bigint, failed_pages = $3::jsonb
FROM s, k, o
WHERE r.id = $1 AND r.state IN ('pending', 'running')
RETURNING r.state::text`

// sqlReopenRun reopens a finished run whose dead pages were redriven (in the same transaction): it
// runs again and finishes again, once, when they are done. Its folded stats become its one stat
// row per kind again (maintenance may have removed the rows they were folded from), so the next
// fold counts them once. Returns the state it had.
const sqlReopenRun = `
WITH r0 AS (
    SELECT id, state FROM crawlq_run WHERE id = $1 AND state IN ('incomplete', 'failed') AND NOT cancel_requested FOR UPDATE
), gone AS (
    DELETE FROM crawlq_run_stat WHERE run_id IN (SELECT id FROM r0)
), base AS (
    INSERT INTO crawlq_run_stat (run_id, pages, items, bytes, errors, retries, kind, n)
    SELECT r.id, r.pages, r.items, r.bytes, r.errors, r.retries, NULL, 1
    FROM crawlq_run r JOIN r0 USING (id)
    UNION ALL
    SELECT r.id, 0, 0, 0, 0, 0, k, v::int
    FROM crawlq_run r JOIN r0 USING (id), jsonb_each_text(r.errors_by_kind) e(k, v)
)
UPDATE crawlq_run r
SET state = 'running', finished_at = NULL, error = NULL, dead_pages = 0, failed_pages = '[]'
FROM r0 WHERE r.id = r0.id
RETURNING r0.state::text`

// sqlLiveRuns lists unfinished runs for the sweep. Index: crawlq_run_live.
const sqlLiveRuns = `SELECT id, cancel_requested FROM crawlq_run WHERE state IN ('pending', 'running') AND id > $1 ORDER BY id LIMIT $2`

// sqlLiveStats sums a live run's stats so far.
const sqlLiveStats = `
SELECT COALESCE(sum(pages), 0), COALESCE(sum(items), 0), COALESCE(sum(bytes), 0), COALESCE(sum(errors), 0),
       COALESCE(sum(retries), 0),
       COALESCE((SELECT jsonb_object_agg(kind, n) FROM (SELECT kind, sum(n) AS n FROM crawlq_run_stat
                 WHERE run_id = $1 AND kind IS NOT NULL GROUP BY kind) x), '{}'::jsonb)
FROM crawlq_run_stat WHERE run_id = $1`

// sqlSpiderStats sums pages, items and errors per spider over runs finished or live since $1, and
// counts runs finished and failed (the metrics function).
const sqlSpiderStats = `
SELECT spider,
       COALESCE(sum(pages), 0), COALESCE(sum(items), 0), COALESCE(sum(errors), 0), COALESCE(sum(dead_pages), 0),
       count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state = 'incomplete'),
       count(*) FILTER (WHERE state = 'failed')
FROM crawlq_run WHERE finished_at >= $1
GROUP BY spider`

// sqlAddStat records one page's contribution to its run's stats.
const sqlAddStat = `
INSERT INTO crawlq_run_stat (run_id, pages, items, bytes, errors, retries, kind)
VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''))`

// sqlAddStats records a batch of pages' contributions to their runs' stats, summed per run and
// kind ($8: how many page outcomes each row sums), and says which of the runs have been asked to
// cancel (their pages stop fetching, see Crawler.cancelled).
const sqlAddStats = `
INSERT INTO crawlq_run_stat (run_id, pages, items, bytes, errors, retries, kind, n)
SELECT r, p, i, b, e, t, NULLIF(k, ''), n
FROM unnest($1::bigint[], $2::int[], $3::int[], $4::bigint[], $5::int[], $6::int[], $7::text[], $8::int[]) AS x(r, p, i, b, e, t, k, n)
RETURNING run_id, (SELECT cancel_requested FROM crawlq_run WHERE id = run_id)`

// sqlAsyncCommit lets the current transaction commit without waiting for its WAL flush (see
// Crawler.discover for why that is safe there).
const sqlAsyncCommit = `SELECT set_config('synchronous_commit', 'off', true)`

// sqlLockBudget reads a run's page budget (-1: none) and locks it until commit, so concurrent pages
// of the run take from it one after the other.
const sqlLockBudget = `SELECT COALESCE(page_budget, -1) FROM crawlq_run WHERE id = $1 FOR UPDATE`

// sqlSpendBudget takes the pages a page added from its run's budget.
const sqlSpendBudget = `UPDATE crawlq_run SET page_budget = GREATEST(page_budget - $2::bigint, 0) WHERE id = $1`

// sqlRobotsGet reads a run's stored robots.txt for an origin.
const sqlRobotsGet = `SELECT status, body, claimed_at > now() - interval '60 seconds' FROM crawlq_robots WHERE run_id = $1 AND origin = $2`

// sqlRobotsClaim claims the fetch of a robots.txt: a new row, or a stale unfinished claim.
const sqlRobotsClaim = `
INSERT INTO crawlq_robots (run_id, origin) VALUES ($1, $2)
ON CONFLICT (run_id, origin) DO UPDATE SET claimed_at = now()
WHERE crawlq_robots.status IS NULL AND crawlq_robots.claimed_at < now() - interval '60 seconds'
RETURNING 1`

// sqlRobotsStore stores a fetched robots.txt.
const sqlRobotsStore = `UPDATE crawlq_robots SET status = $3, body = $4, fetched_at = now() WHERE run_id = $1 AND origin = $2`

// sqlRobotsUnclaim gives up a claim (the fetch failed transiently), so another worker may try.
const sqlRobotsUnclaim = `DELETE FROM crawlq_robots WHERE run_id = $1 AND origin = $2 AND status IS NULL`

// sqlSlotReserve takes host $1 for a request, for up to $2 microseconds (the fetch timeout): a new
// host, or one that is not busy and whose delay has passed. No row back: the host is taken.
const sqlSlotReserve = `
INSERT INTO crawlq_domain AS d (host, busy_until, token)
VALUES ($1, now() + $2::bigint * interval '1 microsecond', $3)
ON CONFLICT (host) DO UPDATE SET busy_until = EXCLUDED.busy_until, token = EXCLUDED.token
WHERE d.next_at <= now() AND d.busy_until <= now()
RETURNING 1`

// sqlSlotWait estimates how long until the host frees: until its delay ends, or, while a request
// is in flight, one delay ($2 microseconds) from now.
const sqlSlotWait = `
SELECT GREATEST(EXTRACT(EPOCH FROM (CASE WHEN busy_until > now() THEN now() + $2::bigint * interval '1 microsecond'
                                         ELSE next_at END) - now()), 0)
FROM crawlq_domain WHERE host = $1`

// sqlSlotRelease frees the host after its request: the next request may start $2 microseconds from
// now, that is after this response arrived, so the gap measured at the server is at least the
// delay. The token fences it.
const sqlSlotRelease = `
UPDATE crawlq_domain SET next_at = now() + $2::bigint * interval '1 microsecond', busy_until = '-infinity', token = NULL
WHERE host = $1 AND token = $3`

// sqlHostFailed records a connection-level failure of host $1 (hostpause.go). During a pause it
// changes nothing (each worker's in-flight pages fail once more, which says nothing new); after
// one, it is a failed probe: one more in the streak, and a pause of $2 µs doubled per failed probe
// before, at most $3 µs. A streak whose last pause ended more than $4 µs ago is stale, from an
// earlier outage whose end no process that saw it fail noticed, and starts again. Returns the pause, the streak, how long the
// host has been failing (seconds) and whether this call started a pause.
const sqlHostFailed = `
WITH old AS (SELECT paused_until FROM crawlq_domain WHERE host = $1)
INSERT INTO crawlq_domain AS d (host, paused_until, fail_streak, down_since)
VALUES ($1, now() + $2::bigint * interval '1 microsecond', 1, now())
ON CONFLICT (host) DO UPDATE SET
    fail_streak = CASE WHEN d.paused_until > now() THEN d.fail_streak
                       WHEN d.paused_until IS NULL OR d.paused_until < now() - $4::bigint * interval '1 microsecond' THEN 1
                       ELSE d.fail_streak + 1 END,
    down_since = CASE WHEN d.paused_until > now() THEN d.down_since
                      WHEN d.paused_until IS NULL OR d.paused_until < now() - $4::bigint * interval '1 microsecond' THEN now()
                      ELSE COALESCE(d.down_since, now()) END,
    paused_until = CASE WHEN d.paused_until > now() THEN d.paused_until
                        WHEN d.paused_until IS NULL OR d.paused_until < now() - $4::bigint * interval '1 microsecond'
                            THEN now() + $2::bigint * interval '1 microsecond'
                        ELSE now() + LEAST($2::bigint * power(2, LEAST(d.fail_streak, 40)), $3::bigint) * interval '1 microsecond' END
RETURNING paused_until, fail_streak, EXTRACT(EPOCH FROM now() - down_since)::float8,
          NOT EXISTS (SELECT 1 FROM old WHERE old.paused_until > now())`

// sqlHostRecovered ends a host's failing streak once it answers again.
const sqlHostRecovered = `
UPDATE crawlq_domain SET paused_until = NULL, fail_streak = 0, down_since = NULL
WHERE host = $1 AND (down_since IS NOT NULL OR paused_until IS NOT NULL)`

// sqlRunQueue reads the queue of a run's jobs.
const sqlRunQueue = `SELECT queue FROM crawlq_run WHERE id = $1`
