package queue

// The queries of automatic maintenance (internal/maintain) on crawlq_job and crawlq_job_once.
// They are apart from sql.go only to keep parallel work on the queue mergeable; the same rules
// hold: each names the index it relies on, and each touches a bounded number of rows.

// sqlPurgeFinished deletes up to $5 finished jobs of queue $1: succeeded ones that finished before
// $2, cancelled ones before $3, dead ones before $4 (a zero-length window is never passed: the
// caller gives '-infinity' for a state it keeps). Index: crawlq_job_finished, a range scan of
// (queue, finished_at) up to the latest of the three cutoffs, so a batch reads what it deletes
// plus the younger dead or cancelled rows under that cutoff, never the whole table (the manual
// sqlRetentionAge reads across queues and may scan). SKIP LOCKED: a purge never waits for anyone.
var sqlPurgeFinished = `
WITH del AS (
    DELETE FROM crawlq_job
    WHERE id = ANY (ARRAY(
        SELECT id FROM crawlq_job
        WHERE queue = $1 AND state IN ('succeeded', 'cancelled', 'dead')
          AND finished_at < GREATEST($2::timestamptz, $3::timestamptz, $4::timestamptz)
          AND finished_at < CASE state WHEN 'succeeded' THEN $2::timestamptz
                                       WHEN 'cancelled' THEN $3::timestamptz
                                       ELSE $4::timestamptz END
        ORDER BY finished_at
        LIMIT $5
        FOR UPDATE SKIP LOCKED
    ))
    RETURNING queue, state
), cnt AS (
    INSERT INTO crawlq_job_count_delta (queue, state, n) SELECT queue, state, -count(*) FROM del GROUP BY queue, state
)
SELECT count(*) FROM del`

// settled is true when parent $1 has no job that is unfinished or dead: nothing of it can run
// again (only dead jobs are redriven), so no job of it can be enqueued again either. Indexes:
// crawlq_job_parent (unfinished) and crawlq_job_parent_dead (0008).
var settled = `
NOT EXISTS (SELECT 1 FROM crawlq_job WHERE parent_id = $1 AND state IN ` + unfinished + `)
AND NOT EXISTS (SELECT 1 FROM crawlq_job WHERE parent_id = $1 AND state = 'dead')`

// sqlDeleteOnceKeys deletes up to $2 once keys of parent $1 after key $3, in key order, only
// while the parent is settled (checked in the same statement, so a caller that judged it settled a
// moment ago cannot be wrong by now). It returns how many it deleted and the last key. Index:
// crawlq_job_once's primary key, read from ($1, $3) on: each batch starts where the last ended,
// never stepping over the rows deleted before it (which stay in the heap and index until vacuum;
// without the cursor a run of 200,000 keys deleted 100 times slower).
var sqlDeleteOnceKeys = `
WITH k AS (
    SELECT ctid, h FROM crawlq_job_once WHERE parent_id = $1 AND h > $3::uuid ORDER BY h LIMIT $2
), d AS (
    DELETE FROM crawlq_job_once
    WHERE ctid = ANY (ARRAY(SELECT ctid FROM k)) AND ` + settled + `
    RETURNING h
)
SELECT count(*), COALESCE((SELECT h FROM d ORDER BY h DESC LIMIT 1), $3::uuid) FROM d`

// sqlParentSettled reports whether parent $1 is settled (see settled).
var sqlParentSettled = `SELECT ` + settled
