package events

// Every query on crawlq_run_event and crawlq_run_report (internal/migrate/migrations/0009_run_events.sql),
// and the read-only queries this package makes of other packages' tables (marked so): the item
// fields of a finished run (crawlq_item, internal/items) and a live run's unfinished page jobs
// (crawlq_job, internal/queue). It never writes those.

// sqlClaim takes up to $1 due events, each the oldest unpublished event of its run (so a run's
// events go out in order: the next is taken only once this one is published), and leases them
// for $2 microseconds by pushing next_attempt_at ahead. A concurrent publisher re-checks
// next_attempt_at on the locked row and skips it. Indexes: crawlq_run_event_unpublished walks the
// backlog oldest first and stops at the limit; crawlq_run_event_pending answers "an older
// unpublished event of the same run?".
const sqlClaim = `
WITH due AS (
    SELECT e.id FROM crawlq_run_event e
    WHERE e.published_at IS NULL AND e.next_attempt_at <= now()
      AND NOT EXISTS (SELECT 1 FROM crawlq_run_event o
                      WHERE o.run_id = e.run_id AND o.published_at IS NULL AND o.id < e.id)
    ORDER BY e.id LIMIT $1
)
UPDATE crawlq_run_event e
SET next_attempt_at = now() + $2::bigint * interval '1 microsecond', attempts = e.attempts + 1
FROM due
WHERE e.id = due.id AND e.published_at IS NULL AND e.next_attempt_at <= now()
RETURNING e.id, e.run_id, e.spider, e.state, COALESCE(e.prev_state, ''), e.run, e.created_at, e.attempts`

// sqlPublished marks events accepted by EventBridge ($2: a note, e.g. that publishing is off).
// Primary key lookups.
const sqlPublished = `
UPDATE crawlq_run_event SET published_at = now(), last_error = NULLIF($2, '')
WHERE id = ANY($1::bigint[]) AND published_at IS NULL`

// sqlRetry puts events back for a later attempt, $2 microseconds from now, with the error.
// Primary key lookups.
const sqlRetry = `
UPDATE crawlq_run_event SET next_attempt_at = now() + $2::bigint * interval '1 microsecond', last_error = $3
WHERE id = ANY($1::bigint[]) AND published_at IS NULL`

// sqlPrune deletes up to $2 events published before $1. Index: crawlq_run_event_published.
const sqlPrune = `
DELETE FROM crawlq_run_event WHERE id IN (
    SELECT id FROM crawlq_run_event WHERE published_at IS NOT NULL AND published_at < $1
    ORDER BY published_at LIMIT $2)`

// sqlBacklog counts unpublished events and the age of the oldest. Index: crawlq_run_event_unpublished.
const sqlBacklog = `
SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)
FROM crawlq_run_event WHERE published_at IS NULL`

// sqlRunEvents lists one run's events in order. Index: crawlq_run_event_run.
const sqlRunEvents = `
SELECT id, run_id, spider, state, COALESCE(prev_state, ''), created_at, published_at, attempts, COALESCE(last_error, '')
FROM crawlq_run_event WHERE run_id = $1 ORDER BY id`

const reportColumns = `run_id, spider, state, monitors, results, items_stored, coverage, stats, evaluated_at`

// sqlReportInsert stores a run's report once: a second judge of the same run (a concurrent
// publisher) inserts nothing and reads the first one's. Primary key.
const sqlReportInsert = `
INSERT INTO crawlq_run_report (run_id, spider, state, monitors, results, items_stored, coverage, stats)
VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7::jsonb, $8::jsonb)
ON CONFLICT (run_id) DO NOTHING
RETURNING ` + reportColumns

// sqlReports reads the reports of some runs. Primary key.
const sqlReports = `SELECT ` + reportColumns + ` FROM crawlq_run_report WHERE run_id = ANY($1::bigint[])`

// sqlGoodItems lists the items of a spider's last $3 succeeded runs before run $2 whose monitors
// did not fail, newest first: the drift monitor's baseline. Index: crawlq_run_report_spider.
const sqlGoodItems = `
SELECT (stats->>'items')::bigint FROM crawlq_run_report
WHERE spider = $1 AND run_id < $2 AND state = 'succeeded' AND monitors <> 'failed'
ORDER BY run_id DESC LIMIT $3`

// sqlItemCount counts a run's stored items (read-only, crawlq_item of internal/items). Index:
// the primary key (run_id, key), a range scan.
const sqlItemCount = `SELECT count(*) FROM crawlq_item WHERE run_id = $1`

// sqlCoverage counts, per field found in a run's stored items, the items that have it present
// and non-empty: not JSON null, not a blank string, not an empty array or object (read-only,
// crawlq_item). A field present but empty on every item shows as 0. Index: the primary key range
// of the run; each item's fields are expanded once.
const sqlCoverage = `
SELECT f.name, count(*) FILTER (WHERE CASE jsonb_typeof(f.value)
                                    WHEN 'null'   THEN false
                                    WHEN 'string' THEN btrim(f.value #>> '{}') <> ''
                                    WHEN 'array'  THEN jsonb_array_length(f.value) > 0
                                    WHEN 'object' THEN f.value <> '{}'::jsonb
                                    ELSE true
                                END)
FROM crawlq_item i CROSS JOIN LATERAL jsonb_each(i.data) AS f(name, value)
WHERE i.run_id = $1
GROUP BY f.name`

// sqlRunDepth counts a live run's waiting and running page jobs (read-only, crawlq_job of
// internal/queue). Index: crawlq_job_parent (its predicate is these states).
const sqlRunDepth = `
SELECT count(*) FILTER (WHERE state IN ('available', 'scheduled')), count(*) FILTER (WHERE state = 'running')
FROM crawlq_job WHERE parent_id = $1 AND state IN ('available', 'scheduled', 'running')`
