-- Every query on crawlq_run_report: a finished run's monitor verdict, computed once when its
-- final event is published (internal/events; the table is in
-- internal/migrate/migrations/0009_run_events.sql).

-- name: InsertRunReport :one
-- Stores the report of a run's final event event_id. A run that finishes again (after a
-- redrive) has a newer final event, whose report replaces the older one. A second judge of the
-- same event, or of an older one (a concurrent publisher), stores nothing and gets no row, and
-- then reads the stored one. items_stored and coverage are NULL when unknown (the items went to
-- another sink). Index: the primary key (the conflict target).
INSERT INTO crawlq_run_report (run_id, spider, state, monitors, results, items_stored, coverage, stats, event_id)
VALUES (@run_id, @spider, @state, @monitors, sqlc.arg(results)::text::jsonb, sqlc.narg(items_stored)::bigint,
        sqlc.narg(coverage)::text::jsonb, sqlc.arg(stats)::text::jsonb, @event_id)
ON CONFLICT (run_id) DO UPDATE
SET spider = EXCLUDED.spider, state = EXCLUDED.state, monitors = EXCLUDED.monitors, results = EXCLUDED.results,
    items_stored = EXCLUDED.items_stored, coverage = EXCLUDED.coverage, stats = EXCLUDED.stats,
    event_id = EXCLUDED.event_id, evaluated_at = now()
WHERE crawlq_run_report.event_id < EXCLUDED.event_id
RETURNING *;

-- name: RunReports :many
-- The reports of some runs. Index: the primary key.
SELECT * FROM crawlq_run_report WHERE run_id = ANY(sqlc.arg(run_ids)::bigint[]);

-- name: GoodRunItems :many
-- The items of a spider's last max_runs succeeded runs before a run whose monitors did not
-- fail, newest first: the drift monitor's baseline. A run that counted changes (a spider that
-- recrawls only what changed) emitted only its new and changed items: its items are those it
-- saw, unchanged ones too. Index: crawlq_run_report_spider (spider, run_id DESC), stopping at the
-- limit.
SELECT COALESCE((stats->'changes'->>'new')::bigint + (stats->'changes'->>'changed')::bigint
                + (stats->'changes'->>'unchanged')::bigint, (stats->>'items')::bigint)::bigint AS run_items
FROM crawlq_run_report
WHERE spider = @spider AND run_id < sqlc.arg(before_run)::bigint AND state = 'succeeded' AND monitors <> 'failed'
ORDER BY run_id DESC
LIMIT sqlc.arg(max_runs)::int;
