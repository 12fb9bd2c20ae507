-- Statements on the session or the current transaction rather than on a table.

-- name: AsyncCommit :exec
-- Lets the current transaction commit without waiting for its WAL flush (see crawl's discover
-- for why that is safe there). Local to the transaction: the connection goes back to the pool
-- with the default.
SELECT set_config('synchronous_commit', 'off', true);
