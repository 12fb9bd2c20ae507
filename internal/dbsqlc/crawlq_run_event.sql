-- Every query on crawlq_run_event: the outbox of run state changes, written by a trigger on
-- crawlq_run and published to EventBridge by internal/events (the table, its trigger and indexes
-- are in internal/migrate/migrations/0009_run_events.sql).

-- name: ClaimRunEvents :many
-- Takes up to max_events due events, each the oldest unpublished event of its run (so a run's
-- events go out in order: the next is taken only once this one is published), and leases them
-- for lease_us microseconds by pushing next_attempt_at ahead. A concurrent publisher re-checks
-- next_attempt_at on the locked row and skips it. Indexes: crawlq_run_event_unpublished walks
-- the backlog oldest first and stops at the limit; crawlq_run_event_pending answers "an older
-- unpublished event of the same run?".
WITH due AS (
    SELECT e.id FROM crawlq_run_event e
    WHERE e.published_at IS NULL AND e.next_attempt_at <= now()
      AND NOT EXISTS (SELECT 1 FROM crawlq_run_event o
                      WHERE o.run_id = e.run_id AND o.published_at IS NULL AND o.id < e.id)
    ORDER BY e.id LIMIT sqlc.arg(max_events)::int
)
UPDATE crawlq_run_event e
SET next_attempt_at = now() + sqlc.arg(lease_us)::bigint * interval '1 microsecond', attempts = e.attempts + 1
FROM due
WHERE e.id = due.id AND e.published_at IS NULL AND e.next_attempt_at <= now()
RETURNING e.id, e.run_id, e.spider, e.state, COALESCE(e.prev_state, '')::text AS prev_state, e.run, e.created_at, e.attempts;

-- name: ClaimRunEventsOf :many
-- Takes, of each run in run_ids, its oldest unpublished event if that one is due (so its events
-- still go out in order), and leases it as ClaimRunEvents does, with the same re-check on the
-- locked row: what a process that has just changed these runs publishes, without taking other
-- processes' events. Index: crawlq_run_event_pending gives each run's oldest unpublished event.
WITH first AS (
    SELECT DISTINCT ON (f.run_id) f.id FROM crawlq_run_event f
    WHERE f.run_id = ANY(sqlc.arg(run_ids)::bigint[]) AND f.published_at IS NULL
    ORDER BY f.run_id, f.id
)
UPDATE crawlq_run_event e
SET next_attempt_at = now() + sqlc.arg(lease_us)::bigint * interval '1 microsecond', attempts = e.attempts + 1
FROM first
WHERE e.id = first.id AND e.published_at IS NULL AND e.next_attempt_at <= now()
RETURNING e.id, e.run_id, e.spider, e.state, COALESCE(e.prev_state, '')::text AS prev_state, e.run, e.created_at, e.attempts;

-- name: MarkRunEventsPublished :exec
-- Marks events accepted by EventBridge (note: why they were not sent, e.g. publishing is off;
-- '' for none). Primary key lookups.
UPDATE crawlq_run_event SET published_at = now(), last_error = NULLIF(sqlc.arg(note)::text, '')
WHERE id = ANY(sqlc.arg(ids)::bigint[]) AND published_at IS NULL;

-- name: RetryRunEvents :exec
-- Puts events back for a later attempt, wait_us microseconds from now, with the error. Primary
-- key lookups.
UPDATE crawlq_run_event
SET next_attempt_at = now() + sqlc.arg(wait_us)::bigint * interval '1 microsecond', last_error = sqlc.arg(last_error)::text
WHERE id = ANY(sqlc.arg(ids)::bigint[]) AND published_at IS NULL;

-- name: PruneRunEvents :execrows
-- Deletes up to max_events events published before a time. Index: crawlq_run_event_published.
DELETE FROM crawlq_run_event WHERE id IN (
    SELECT p.id FROM crawlq_run_event p
    WHERE p.published_at IS NOT NULL AND p.published_at < sqlc.arg(before)::timestamptz
    ORDER BY p.published_at LIMIT sqlc.arg(max_events)::int);

-- name: RunEventBacklog :one
-- Counts unpublished events and the age of the oldest, in seconds. Index:
-- crawlq_run_event_unpublished.
SELECT count(*) AS events, COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS oldest_seconds
FROM crawlq_run_event WHERE published_at IS NULL;

-- name: RunEvents :many
-- One run's events in order, published or not. Index: crawlq_run_event_run.
SELECT * FROM crawlq_run_event WHERE run_id = @run_id ORDER BY id;
