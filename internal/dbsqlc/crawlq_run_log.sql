-- name: AppendRunLog :exec
-- Adds lines to a run's log, in order.
INSERT INTO crawlq_run_log (run_id, line)
SELECT @run_id::bigint, l FROM unnest(@lines::text[]) WITH ORDINALITY AS x(l, n) ORDER BY n;

-- name: ReadRunLog :many
-- A run's lines after a cursor (an id). Index: crawlq_run_log_run.
SELECT id, at, line FROM crawlq_run_log
WHERE run_id = @run_id AND id > @after_id
ORDER BY id
LIMIT @max_lines;

-- name: AppendRunLogAt :exec
-- Adds lines to a run's log, in order, each with the time it happened (a page's death, a host's
-- pause, a state change), which may be earlier than the insert. ats and lines are parallel.
INSERT INTO crawlq_run_log (run_id, at, line)
SELECT @run_id::bigint, (sqlc.arg(ats)::timestamptz[])[i], (sqlc.arg(lines)::text[])[i]
FROM generate_subscripts(sqlc.arg(lines)::text[], 1) AS i ORDER BY i;
