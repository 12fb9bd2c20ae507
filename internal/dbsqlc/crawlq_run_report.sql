-- Every query on crawlq_run_report: a finished run's monitor verdict, computed once when its
-- final event is published (internal/events; the table is in
-- internal/migrate/migrations/0009_run_events.sql).

-- name: InsertRunReport :one
-- Stores a run's report once: a second judge of the same run (a concurrent publisher) inserts
-- nothing and gets no row, and then reads the first one's. items_stored and coverage are NULL
-- when unknown (the items went to another sink). Index: the primary key (the conflict target).
INSERT INTO crawlq_run_report (run_id, spider, state, monitors, results, items_stored, coverage, stats)
VALUES (@run_id, @spider, @state, @monitors, sqlc.arg(results)::text::jsonb, sqlc.narg(items_stored)::bigint,
        sqlc.narg(coverage)::text::jsonb, sqlc.arg(stats)::text::jsonb)
ON CONFLICT (run_id) DO NOTHING
RETURNING *;

-- name: RunReports :many
-- The reports of some runs. Index: the primary key.
SELECT * FROM crawlq_run_report WHERE run_id = ANY(sqlc.arg(run_ids)::bigint[]);

-- name: GoodRunItems :many
-- The items of a spider's last max_runs succeeded runs before a run whose monitors did not
-- fail, newest first: the drift monitor's baseline. Index: crawlq_run_report_spider (spider,
-- run_id DESC), stopping at the limit.
SELECT (stats->>'items')::bigint AS run_items FROM crawlq_run_report
WHERE spider = @spider AND run_id < sqlc.arg(before_run)::bigint AND state = 'succeeded' AND monitors <> 'failed'
ORDER BY run_id DESC
LIMIT sqlc.arg(max_runs)::int;
