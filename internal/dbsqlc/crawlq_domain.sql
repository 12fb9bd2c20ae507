-- Every query on crawlq_domain: politeness and host health shared by every worker, one row per
-- host (internal/crawl; the table is in internal/migrate/migrations/0002_crawl.sql and
-- 0005_run_outcomes.sql). A spider's proxies have rows of their own, keyed "proxy " and the
-- proxy's URL with its password redacted (no host name has a space): their politeness (the
-- slot queries) and their bench (HostFailed, HostRecovered, PausedOf), shared as a host's are. Every request updates its host's row twice (ReserveSlot, ReleaseSlot),
-- so the table has no index besides its primary key (host): an index on the times would make
-- those updates non-HOT. now: the caller's clock (tests), else the database's (NULL); durations
-- are in microseconds (_us).

-- name: ReserveSlot :one
-- Takes a host for one request, for up to busy_for_us (the fetch timeout, so a worker that dies frees
-- it): a new host, or one that is not busy and whose delay has passed. No row back: the host is
-- taken or in its delay (SlotWait says for how long). The token fences the release.
INSERT INTO crawlq_domain AS d (host, busy_until, token)
VALUES (@host, COALESCE(sqlc.narg(now)::timestamptz, now()) + sqlc.arg(busy_for_us)::bigint * interval '1 microsecond', @token::bigint)
ON CONFLICT (host) DO UPDATE SET busy_until = EXCLUDED.busy_until, token = EXCLUDED.token
WHERE d.next_at <= COALESCE(sqlc.narg(now)::timestamptz, now())
  AND d.busy_until <= COALESCE(sqlc.narg(now)::timestamptz, now())
RETURNING true AS reserved;

-- name: SlotWait :one
-- How long until a host frees, in seconds: until its delay ends, or, while a request is in
-- flight, one delay (delay_us) from now.
SELECT GREATEST(EXTRACT(EPOCH FROM (
           CASE WHEN busy_until > COALESCE(sqlc.narg(now)::timestamptz, now())
                THEN COALESCE(sqlc.narg(now)::timestamptz, now()) + sqlc.arg(delay_us)::bigint * interval '1 microsecond'
                ELSE next_at END) - COALESCE(sqlc.narg(now)::timestamptz, now())), 0)::float8 AS wait_seconds
FROM crawlq_domain WHERE host = @host;

-- name: ReleaseSlot :exec
-- Frees a host after its request: the next request may start delay_us from now, that is after
-- this response arrived, so the gap measured at the server is at least the delay. The token
-- fences it: a worker that outlived its busy window cannot shorten someone else's.
UPDATE crawlq_domain
SET next_at = COALESCE(sqlc.narg(now)::timestamptz, now()) + sqlc.arg(delay_us)::bigint * interval '1 microsecond', busy_until = '-infinity', token = NULL
WHERE host = @host AND token = @token::bigint;

-- name: HostFailed :one
-- Records a connection-level failure of a host (crawl's hostpause.go). During a pause it changes
-- nothing (each worker's in-flight pages fail once more, which says nothing new); after one, it
-- is a failed probe: one more in the streak, and a pause of first_pause_us doubled per failed probe
-- before, at most max_pause_us. A streak whose last pause ended more than stale_after_us ago is stale,
-- from an earlier outage whose end no process that saw it fail noticed, and starts again. Returns
-- the pause, the streak, how long the host has been failing and whether this call started a
-- pause.
WITH old AS (SELECT o.paused_until FROM crawlq_domain o WHERE o.host = sqlc.arg(host)::text)
INSERT INTO crawlq_domain AS d (host, paused_until, fail_streak, down_since)
VALUES (sqlc.arg(host)::text, COALESCE(sqlc.narg(now)::timestamptz, now()) + sqlc.arg(first_pause_us)::bigint * interval '1 microsecond', 1,
        COALESCE(sqlc.narg(now)::timestamptz, now()))
ON CONFLICT (host) DO UPDATE SET
    fail_streak = CASE WHEN d.paused_until > COALESCE(sqlc.narg(now)::timestamptz, now()) THEN d.fail_streak
                       WHEN d.paused_until IS NULL
                         OR d.paused_until < COALESCE(sqlc.narg(now)::timestamptz, now()) - sqlc.arg(stale_after_us)::bigint * interval '1 microsecond' THEN 1
                       ELSE d.fail_streak + 1 END,
    down_since = CASE WHEN d.paused_until > COALESCE(sqlc.narg(now)::timestamptz, now()) THEN d.down_since
                      WHEN d.paused_until IS NULL
                        OR d.paused_until < COALESCE(sqlc.narg(now)::timestamptz, now()) - sqlc.arg(stale_after_us)::bigint * interval '1 microsecond'
                          THEN COALESCE(sqlc.narg(now)::timestamptz, now())
                      ELSE COALESCE(d.down_since, COALESCE(sqlc.narg(now)::timestamptz, now())) END,
    paused_until = CASE WHEN d.paused_until > COALESCE(sqlc.narg(now)::timestamptz, now()) THEN d.paused_until
                        WHEN d.paused_until IS NULL
                          OR d.paused_until < COALESCE(sqlc.narg(now)::timestamptz, now()) - sqlc.arg(stale_after_us)::bigint * interval '1 microsecond'
                            THEN COALESCE(sqlc.narg(now)::timestamptz, now()) + sqlc.arg(first_pause_us)::bigint * interval '1 microsecond'
                        ELSE COALESCE(sqlc.narg(now)::timestamptz, now())
                             + LEAST(sqlc.arg(first_pause_us)::bigint * power(2, LEAST(d.fail_streak, 40)), sqlc.arg(max_pause_us)::bigint)
                               * interval '1 microsecond' END
RETURNING d.paused_until::timestamptz AS paused_until, d.fail_streak,
          EXTRACT(EPOCH FROM COALESCE(sqlc.narg(now)::timestamptz, now()) - d.down_since)::float8 AS down_seconds,
          NOT EXISTS (SELECT 1 FROM old WHERE old.paused_until > COALESCE(sqlc.narg(now)::timestamptz, now())) AS started;

-- name: HostRecovered :exec
-- Ends a host's failing streak once it answers again.
UPDATE crawlq_domain SET paused_until = NULL, fail_streak = 0, down_since = NULL
WHERE host = @host AND (down_since IS NOT NULL OR paused_until IS NOT NULL);

-- name: ClearHostPauses :many
-- Ends the failing streaks of the given hosts, as an operator's redrive asks ("try again now"):
-- their pages are fetched at once, and a host still down starts a new streak with its full down
-- limit. Returns the hosts that were in a streak, with since when and until when. Index: the
-- primary key.
UPDATE crawlq_domain d SET paused_until = NULL, fail_streak = 0, down_since = NULL
FROM (SELECT o.host, o.paused_until, o.down_since FROM crawlq_domain o
      WHERE o.host = ANY(@hosts::text[]) AND (o.down_since IS NOT NULL OR o.paused_until IS NOT NULL)
      ORDER BY o.host FOR UPDATE) old
WHERE d.host = old.host
RETURNING d.host, old.paused_until::timestamptz AS was_paused_until, COALESCE(old.down_since, old.paused_until)::timestamptz AS was_down_since;

-- name: PruneDomains :one
-- Walks the rows in host order, max_hosts at a time from after a host, and deletes those idle
-- since before a time: no request in flight, none due to wait (a host in its delay has next_at in
-- the future) and no pause since then. A paused host's row holds its failing streak (fail_streak,
-- down_since), which is how a host that never comes back reaches its down limit: deleting it would
-- start the streak over, so a down host's run would never end. A forgotten host starts again as a
-- new one, which is what an idle host is. Index: the primary key (host); there is deliberately no index on the times, which
-- every request updates. The DELETE re-checks the times on the current row, so a host reserved
-- meanwhile stays. Returns the last host of the chunk, how many hosts the chunk held (fewer than
-- max_hosts: the walk reached the end) and how many rows it deleted.
WITH chunk AS (
    SELECT host FROM crawlq_domain WHERE host > @after_host::text ORDER BY host LIMIT @max_hosts
), del AS (
    DELETE FROM crawlq_domain d
    WHERE d.host IN (SELECT host FROM chunk) AND d.next_at < @idle_before::timestamptz AND d.busy_until < @idle_before::timestamptz
      AND (d.paused_until IS NULL OR d.paused_until < @idle_before::timestamptz)
    RETURNING 1
)
SELECT COALESCE((SELECT max(host) FROM chunk), '')::text AS last_host,
       (SELECT count(*) FROM chunk) AS hosts,
       (SELECT count(*) FROM del) AS deleted;

-- name: HostFailing :one
-- Whether a host is in a failing streak that is not stale (see HostFailed): a 5xx or 429 from it
-- is then a failed probe of a host already known down, not a page's own failure. No row: the
-- host is not failing.
SELECT (down_since IS NOT NULL AND paused_until IS NOT NULL
        AND paused_until >= COALESCE(sqlc.narg(now)::timestamptz, now()) - sqlc.arg(stale_after_us)::bigint * interval '1 microsecond')::bool AS failing
FROM crawlq_domain WHERE host = @host;

-- name: HostPauseOf :one
-- A host's pause while it lasts (for crawlq run --watch): until when, its failed probes and since
-- when it fails. No row: the host is not paused.
SELECT paused_until::timestamptz AS paused_until, fail_streak, COALESCE(down_since, paused_until)::timestamptz AS down_since
FROM crawlq_domain
WHERE host = @host AND paused_until > COALESCE(sqlc.narg(now)::timestamptz, now());

-- name: PausedOf :many
-- The pauses among the given rows that last past now: how a process learns which of a spider's
-- proxies another process benched. Index: the primary key.
SELECT host, paused_until::timestamptz AS paused_until
FROM crawlq_domain
WHERE host = ANY(@hosts::text[]) AND paused_until > COALESCE(sqlc.narg(now)::timestamptz, now());
