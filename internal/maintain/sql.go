package maintain

// Every query on crawlq_leader (internal/migrate/migrations/0008_maintain.sql). The other tables
// maintenance deletes from are reached through their owners (internal/queue, internal/crawl).

// sqlAcquire takes lease $1 for holder $2 until $3 microseconds from now, when no pass holds it
// and the last one ended at least an interval ago. No row back: not taken. Times are the
// database's, the one clock every process shares. Index: the primary key.
const sqlAcquire = `
INSERT INTO crawlq_leader AS l (name, holder, expires_at, next_at)
VALUES ($1, $2, now() + $3::bigint * interval '1 microsecond', '-infinity')
ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
WHERE l.expires_at < now() AND l.next_at <= now()
RETURNING 1`

// sqlRelease ends holder $2's pass of lease $1; the next may start $3 microseconds from now.
const sqlRelease = `
UPDATE crawlq_leader SET expires_at = now(), next_at = now() + $3::bigint * interval '1 microsecond'
WHERE name = $1 AND holder = $2`
