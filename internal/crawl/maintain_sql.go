package crawl

// The queries of automatic maintenance (internal/maintain) on crawlq_run, crawlq_run_stat,
// crawlq_robots and crawlq_domain. They are apart from sql.go only to keep parallel work on the
// crawl mergeable; each names its index and touches a bounded number of rows.

// sqlPurgeCandidates lists up to $2 runs that finished before $1 and whose leftovers (once keys,
// robots.txt copies, stat rows) are not yet deleted, oldest first. A run that is live again
// (reopened) is not finished and so not listed. Index: crawlq_run_purge (0008).
const sqlPurgeCandidates = `
SELECT id FROM crawlq_run
WHERE finished_at IS NOT NULL AND purged_at IS NULL AND finished_at < $1
  AND state NOT IN ('pending', 'running')
ORDER BY finished_at
LIMIT $2`

// sqlDeleteRunStats deletes up to $2 stat rows of run $1, which must be finished: its stats were
// folded into its row when it finished (sqlFinishRun). Index: crawlq_run_stat_run.
const sqlDeleteRunStats = `
DELETE FROM crawlq_run_stat
WHERE ctid = ANY (ARRAY(SELECT ctid FROM crawlq_run_stat WHERE run_id = $1 LIMIT $2))
  AND EXISTS (SELECT 1 FROM crawlq_run WHERE id = $1 AND finished_at IS NOT NULL AND state NOT IN ('pending', 'running'))`

// sqlDeleteRunRobots deletes up to $2 stored robots.txt copies of finished run $1. Index: the
// primary key (run_id leads).
const sqlDeleteRunRobots = `
DELETE FROM crawlq_robots
WHERE ctid = ANY (ARRAY(SELECT ctid FROM crawlq_robots WHERE run_id = $1 LIMIT $2))
  AND EXISTS (SELECT 1 FROM crawlq_run WHERE id = $1 AND finished_at IS NOT NULL AND state NOT IN ('pending', 'running'))`

// sqlMarkPurged records that a finished run's leftovers are gone, so it is not listed again.
const sqlMarkPurged = `
UPDATE crawlq_run SET purged_at = now()
WHERE id = $1 AND finished_at IS NOT NULL AND state NOT IN ('pending', 'running')`

// sqlPruneDomains walks the politeness rows in host order, $3 at a time from after host $1, and
// deletes those idle since before $2: no request in flight and none due to wait (a host paused or
// in its delay has next_at in the future). A forgotten host starts again as a new one, which is
// what an idle host is. Index: the primary key (host); there is deliberately no index on the
// times, which every request updates (an index there would make those updates non-HOT). The
// DELETE re-checks the times on the current row, so a host reserved meanwhile stays. It returns
// the last host of the chunk, how many hosts the chunk held (fewer than $3: the walk reached the
// end) and how many rows it deleted.
const sqlPruneDomains = `
WITH chunk AS (
    SELECT host FROM crawlq_domain WHERE host > $1 ORDER BY host LIMIT $3
), del AS (
    DELETE FROM crawlq_domain d
    WHERE d.host IN (SELECT host FROM chunk) AND d.next_at < $2 AND d.busy_until < $2
    RETURNING 1
)
SELECT COALESCE((SELECT max(host) FROM chunk), ''), (SELECT count(*) FROM chunk), (SELECT count(*) FROM del)`
