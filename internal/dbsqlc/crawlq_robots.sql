-- Every query on crawlq_robots: robots.txt, fetched once per site per run (internal/crawl; the
-- table is in internal/migrate/migrations/0002_crawl.sql). A row with a NULL status is a claim:
-- one worker is fetching it (claimed_at), the others wait; a claim older than 60 seconds is stale
-- and can be taken over. Every statement finds its row by the primary key (run_id, origin).
-- now: the caller's clock (tests), else the database's (NULL).

-- name: GetRobots :one
-- A run's stored robots.txt for an origin, or a claim on it (status NULL) and whether the claim
-- is fresh. No row: nobody has claimed it.
SELECT status, body,
       (claimed_at > COALESCE(sqlc.narg(now)::timestamptz, now()) - interval '60 seconds')::boolean AS fresh
FROM crawlq_robots WHERE run_id = @run_id AND origin = @origin;

-- name: ClaimRobots :one
-- Claims the fetch of a robots.txt: a new row, or a stale unfinished claim. No row back: someone
-- else holds a fresh claim, or it is fetched already.
INSERT INTO crawlq_robots AS r (run_id, origin, claimed_at)
VALUES (@run_id, @origin, COALESCE(sqlc.narg(now)::timestamptz, now()))
ON CONFLICT (run_id, origin) DO UPDATE SET claimed_at = EXCLUDED.claimed_at
WHERE r.status IS NULL AND r.claimed_at < EXCLUDED.claimed_at - interval '60 seconds'
RETURNING true AS claimed;

-- name: StoreRobots :exec
-- Stores a fetched robots.txt (status 0: unreachable for good, which disallows everything).
UPDATE crawlq_robots SET status = @status::int, body = @body::bytea, fetched_at = now()
WHERE run_id = @run_id AND origin = @origin;

-- name: UnclaimRobots :exec
-- Gives up a claim (the fetch failed transiently), so another worker may try.
DELETE FROM crawlq_robots WHERE run_id = @run_id AND origin = @origin AND status IS NULL;

-- name: DeleteRunRobots :execrows
-- Deletes up to max_rows stored robots.txt copies of a finished run (maintenance). Index: the
-- primary key, whose leading column is run_id.
DELETE FROM crawlq_robots
WHERE ctid = ANY (ARRAY(SELECT b.ctid FROM crawlq_robots b WHERE b.run_id = sqlc.arg(run_id)::bigint LIMIT sqlc.arg(max_rows)::int))
  AND EXISTS (SELECT 1 FROM crawlq_run r
              WHERE r.id = sqlc.arg(run_id)::bigint AND r.finished_at IS NOT NULL AND r.state NOT IN ('pending', 'running'));
