-- Every query on crawlq_run_stat: what pages added to their run's stats, one row per run and
-- outcome kind per batch of pages finished together (internal/crawl; the table is in
-- internal/migrate/migrations/0002_crawl.sql and 0021_run_host_pauses.sql). Rows are only inserted while a run lives (an insert
-- contends with nobody), folded into the run row when it finishes (crawlq_run.sql: FinishRun) and
-- deleted by maintenance after that.

-- name: AddRunStat :exec
-- Records a contribution to a run's stats: one page outcome (n 1), or what a command spider
-- reported (n: the outcomes it sums, which errors_by_kind counts), or a host pause (host_pauses
-- 1: a wait, not an outcome of a page). Kind '': no kind.
INSERT INTO crawlq_run_stat (run_id, pages, items, bytes, errors, retries, host_pauses, kind, n)
VALUES (@run_id, @pages, @items, @bytes, @errors, @retries, @host_pauses, NULLIF(@kind::text, ''), @n);

-- name: AddRunStats :many
-- Records a batch of pages' contributions to their runs' stats, summed per run and kind (n: how
-- many page outcomes each row sums), and says which of the runs have been asked to cancel (their
-- pages stop fetching). The arrays are parallel, one element per row. Index: crawlq_run's primary
-- key, for the cancel flag. The INSERT is in the PL/pgSQL function crawlq_add_run_stats (migration
-- 0010: every batch of pages runs it, and a function's plan is made once per session).
SELECT s.run_id::bigint AS run_id, s.cancel_requested::boolean AS cancel_requested
FROM crawlq_add_run_stats(sqlc.arg(run_ids)::bigint[], sqlc.arg(pages)::int[], sqlc.arg(items)::int[],
                          sqlc.arg(bytes)::bigint[], sqlc.arg(errors)::int[], sqlc.arg(retries)::int[],
                          sqlc.arg(kinds)::text[], sqlc.arg(counts)::int[]) AS s;

-- name: RetryRedriven :exec
-- Counts the dead pages a redrive has just queued again (redriven) as retries, no longer as errors:
-- in the transaction that reopened the run (crawlq_run.sql: ReopenRun), whose folded errors count
-- them, each page's last attempt is now retried. The errors never go below 0 (a run an earlier
-- release finished counted only some deaths among them). Index: the primary key of crawlq_run.
INSERT INTO crawlq_run_stat (run_id, errors, retries, kind, n)
SELECT r.id, -least(r.errors, sqlc.arg(redriven)::bigint)::int, sqlc.arg(redriven)::int, NULL, 1
FROM crawlq_run r WHERE r.id = sqlc.arg(run_id)::bigint;

-- name: LiveRunStats :one
-- Sums a live run's stats so far. Index: crawlq_run_stat_run.
SELECT COALESCE(sum(pages), 0)::bigint AS pages, COALESCE(sum(items), 0)::bigint AS items,
       COALESCE(sum(bytes), 0)::bigint AS bytes, COALESCE(sum(errors), 0)::bigint AS errors,
       COALESCE(sum(retries), 0)::bigint AS retries, COALESCE(sum(host_pauses), 0)::bigint AS host_pauses,
       COALESCE((SELECT jsonb_object_agg(x.kind, x.n) FROM (SELECT k.kind, sum(k.n) AS n FROM crawlq_run_stat k
                 WHERE k.run_id = sqlc.arg(run_id)::bigint AND k.kind IS NOT NULL GROUP BY k.kind) x), '{}'::jsonb)::jsonb AS errors_by_kind
FROM crawlq_run_stat s WHERE s.run_id = sqlc.arg(run_id)::bigint;

-- name: DeleteRunStats :execrows
-- Deletes up to max_rows stat rows of a run, which must be finished: its stats were folded into
-- its row when it finished (FinishRun). Index: crawlq_run_stat_run.
DELETE FROM crawlq_run_stat
WHERE ctid = ANY (ARRAY(SELECT s.ctid FROM crawlq_run_stat s WHERE s.run_id = sqlc.arg(run_id)::bigint LIMIT sqlc.arg(max_rows)::int))
  AND EXISTS (SELECT 1 FROM crawlq_run r
              WHERE r.id = sqlc.arg(run_id)::bigint AND r.finished_at IS NOT NULL AND r.state NOT IN ('pending', 'running'));
