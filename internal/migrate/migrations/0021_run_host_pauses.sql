-- 0021_run_host_pauses: a host pause (a host found down and paused: a wait, not an error) is a
-- counter of its own, host_pauses, in a run's stat rows and in its folded stats (owned by
-- internal/crawl; the queries are in internal/dbsqlc/crawlq_run_stat.sql and crawlq_run.sql).
-- It was a kind among the errors (errors_by_kind's host_paused), which every reader had to take
-- out again.

ALTER TABLE crawlq_run ADD COLUMN host_pauses bigint NOT NULL DEFAULT 0;
ALTER TABLE crawlq_run_stat ADD COLUMN host_pauses integer NOT NULL DEFAULT 0;

-- The pauses already recorded move to the new counter. Only the state's update fires the run
-- event trigger, so this records no event. A run event taken before keeps the kind in its
-- snapshot, and a worker of the previous release may still write it while a deploy rolls:
-- internal/runstat reads it as host pauses wherever it is found.
UPDATE crawlq_run
SET host_pauses = host_pauses + (errors_by_kind ->> 'host_paused')::bigint,
    errors_by_kind = errors_by_kind - 'host_paused'
WHERE errors_by_kind ? 'host_paused';

UPDATE crawlq_run_stat SET host_pauses = host_pauses + n, kind = NULL WHERE kind = 'host_paused';
