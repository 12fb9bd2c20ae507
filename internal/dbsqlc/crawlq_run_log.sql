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
