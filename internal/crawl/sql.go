package crawl

// The statements internal/crawl/finish.go still sends as Go strings, kept only until finish.go
// (being rewritten in parallel) calls their dbsqlc twins; every other query of the crawl is in
// internal/dbsqlc (crawlq_run.sql, crawlq_run_stat.sql, crawlq_robots.sql, crawlq_domain.sql).
// Each is the same SQL as its twin, with positional parameters in the twin's order.

// TODO(merge): finish.go moves to dbsqlc.AddRunStats.
const sqlAddStats = `
INSERT INTO crawlq_run_stat (run_id, pages, items, bytes, errors, retries, kind, n)
SELECT r, p, i, b, e, t, NULLIF(k, ''), n
FROM unnest($1::bigint[], $2::int[], $3::int[], $4::bigint[], $5::int[], $6::int[], $7::text[], $8::int[]) AS x(r, p, i, b, e, t, k, n)
RETURNING run_id, (SELECT cancel_requested FROM crawlq_run WHERE id = run_id)`

// TODO(merge): finish.go moves to dbsqlc.AsyncCommit.
const sqlAsyncCommit = `SELECT set_config('synchronous_commit', 'off', true)`

// TODO(merge): finish.go moves to dbsqlc.LockRunBudget.
const sqlLockBudget = `SELECT COALESCE(page_budget, -1) FROM crawlq_run WHERE id = $1 FOR UPDATE`

// TODO(merge): finish.go moves to dbsqlc.SpendRunBudget.
const sqlSpendBudget = `UPDATE crawlq_run SET page_budget = GREATEST(page_budget - $2::bigint, 0) WHERE id = $1`
