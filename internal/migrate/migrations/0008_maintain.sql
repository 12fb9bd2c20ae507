-- 0008_maintain: what automatic maintenance (internal/maintain) needs, and autovacuum settings
-- for the tables a crawl writes on every page.

-- One row per maintenance task that must run on one process at a time and at most once per
-- interval, however many processes try (a lease, not an advisory lock: session locks do not
-- survive RDS Proxy's connection multiplexing, and a lease expires by itself when its holder
-- dies). Owned by internal/maintain (its sql.go).
CREATE TABLE crawlq_leader (
    name       text PRIMARY KEY,
    holder     text NOT NULL,
    expires_at timestamptz NOT NULL,  -- the holder's pass must end before this
    next_at    timestamptz NOT NULL   -- no pass starts before this (set when a pass ends)
);

-- A finished run whose once keys, robots.txt copies and stat rows have been deleted (see
-- internal/crawl/maintain.go). NULL while there is something to delete or the run is live.
ALTER TABLE crawlq_run ADD COLUMN purged_at timestamptz;

-- Finished runs not yet purged, oldest first. Purged runs leave it, so it stays as small as the
-- runs of the last retention window.
CREATE INDEX crawlq_run_purge ON crawlq_run (finished_at) WHERE finished_at IS NOT NULL AND purged_at IS NULL;

-- A run's dead jobs: a run with any is not purged (a redrive may bring them back). Dead jobs are
-- few, so the index is small; it also serves listing a run's dead pages.
CREATE INDEX crawlq_job_parent_dead ON crawlq_job (parent_id) WHERE state = 'dead' AND parent_id IS NOT NULL;
