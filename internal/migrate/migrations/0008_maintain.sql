-- 0008_maintain: what automatic maintenance (internal/maintain) needs, and autovacuum settings
-- for the tables a crawl writes on every page.

-- One row per maintenance task that must run on one process at a time and at most once per
-- interval, however many processes try (a lease, not an advisory lock: session locks do not
-- survive RDS Proxy's connection multiplexing, and a lease expires by itself when its holder
-- dies). Owned by internal/maintain (internal/dbsqlc/crawlq_leader.sql).
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

-- A run's dead jobs (a run with any is not purged: a redrive may bring them back) are found through
-- crawlq_job_parent_dead, made by 0005.

-- Autovacuum for the tables a crawl writes on every page. The defaults (vacuum when 20% of a table
-- is dead, throttled to cost 200 per 2 ms) suit tables that change slowly; these change all the
-- time: a page job is inserted, updated once or twice and deleted by retention, a once key is
-- inserted and later deleted, the count deltas are inserted and folded away, a host's row is
-- updated twice per request. Measured with `crawlq bench --op soak` (609,000 pages, 2-minute
-- windows; README, "Storage over time"): with the defaults crawlq_job ended at 111.7 MB of heap for
-- 288,623 live rows (and 261,585 dead), everything but items at 187 MB; with these, 85.7 MB for
-- 247,746 live rows, 146 MB. At that size both vacuum once per autovacuum_naptime; the scale
-- factors matter as the table grows (a 24h window at 1,160 pages/s is ~100M rows: 20% is 20M dead
-- rows before a vacuum starts, 2% is 2M). These vacuums are cheap (recent rows, in memory), so
-- they run unthrottled. Naptime stays the server's (a parameter group setting on RDS).
ALTER TABLE crawlq_job SET (
    autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_vacuum_insert_threshold = 10000,
    autovacuum_analyze_scale_factor = 0.05, autovacuum_vacuum_cost_delay = 0);
ALTER TABLE crawlq_job_once SET (
    autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0.1, autovacuum_vacuum_cost_delay = 0);
ALTER TABLE crawlq_job_count_delta SET (
    autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 0);
ALTER TABLE crawlq_run_stat SET (
    autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 0);
ALTER TABLE crawlq_domain SET (
    autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 0);
ALTER TABLE crawlq_robots SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 500);
ALTER TABLE crawlq_worker SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500);
ALTER TABLE crawlq_leader SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200);
