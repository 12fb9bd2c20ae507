-- Every query on crawlq_session: the retired sessions of runs (internal/crawl's sessions.go; the
-- table is in internal/migrate/migrations/0017_retired_session.sql).

-- name: RetireSession :exec
-- Records that a run's session was retired; a second retirement changes nothing.
INSERT INTO crawlq_session (run_id, session) VALUES (@run_id, @session)
ON CONFLICT (run_id, session) DO NOTHING;

-- name: RetiredSessions :many
-- The sessions of a run retired by any process (each process reads them at most once a second
-- per run: internal/crawl's sessions.go). Index: the primary key, whose leading column is run_id.
SELECT session FROM crawlq_session WHERE run_id = @run_id;

-- name: DeleteRunSessions :execrows
-- Deletes up to max_rows retired sessions of a finished run (maintenance). Index: the primary
-- key, whose leading column is run_id.
DELETE FROM crawlq_session
WHERE ctid = ANY (ARRAY(SELECT s.ctid FROM crawlq_session s WHERE s.run_id = sqlc.arg(run_id)::bigint LIMIT sqlc.arg(max_rows)::int))
  AND EXISTS (SELECT 1 FROM crawlq_run r
              WHERE r.id = sqlc.arg(run_id)::bigint AND r.finished_at IS NOT NULL AND r.state NOT IN ('pending', 'running'));
