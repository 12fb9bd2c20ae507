-- Every query on crawlq_leader: one lease row per maintenance task that must run on one process
-- at a time and at most once per interval (internal/maintain; the table is in
-- internal/migrate/migrations/0008_maintain.sql). Times are the database's, the one clock every
-- process shares. Both statements find the row by its primary key (name).

-- name: AcquireLease :one
-- Takes a lease for a holder until ttl_us microseconds from now, when no pass holds it and the
-- last one ended at least an interval ago. No row back: not taken.
INSERT INTO crawlq_leader AS l (name, holder, expires_at, next_at)
VALUES (@name, @holder, now() + sqlc.arg(ttl_us)::bigint * interval '1 microsecond', '-infinity')
ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
WHERE l.expires_at < now() AND l.next_at <= now()
RETURNING true AS acquired;

-- name: ReleaseLease :exec
-- Ends a holder's pass of a lease; the next may start interval_us microseconds from now.
UPDATE crawlq_leader SET expires_at = now(), next_at = now() + sqlc.arg(interval_us)::bigint * interval '1 microsecond'
WHERE name = @name AND holder = @holder;
