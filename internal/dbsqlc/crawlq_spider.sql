-- Every query on crawlq_spider: declarative and command spider specs, one row per pushed version
-- (internal/spiderstore; the table is in internal/migrate/migrations/0006_spiders.sql). The table
-- holds thousands of rows at most.

-- name: LatestSpec :one
-- The newest version of a spec. Index: crawlq_spider_latest (name, seq DESC), one row.
SELECT * FROM crawlq_spider WHERE name = @name ORDER BY seq DESC LIMIT 1;

-- name: SpecVersion :one
-- One version of a spec. Index: the (name, version) unique index.
SELECT * FROM crawlq_spider WHERE name = @name AND version = @version;

-- name: NextSpecVersion :one
-- The version number a new push of a name gets: one more than the largest version it ever had
-- that is a number. Index: crawlq_spider_latest (the name's rows).
SELECT (COALESCE(max(version::bigint), 0) + 1)::bigint AS next_version FROM crawlq_spider
WHERE name = @name AND version ~ '^[0-9]{1,18}$';

-- name: InsertSpec :one
-- Adds a version; a version already taken makes it return no row. Index: the (name, version)
-- unique index (the conflict target).
INSERT INTO crawlq_spider (name, version, kind, spec, sha256) VALUES (@name, @version, @kind, @spec, @sha256)
ON CONFLICT (name, version) DO NOTHING
RETURNING created_at;

-- name: SeedSpec :execrows
-- Pushes a built-in spec as version 1 of a name that has never been stored (1 row: seeded).
-- Index: crawlq_spider_latest (the NOT EXISTS probe).
INSERT INTO crawlq_spider (name, version, kind, spec, sha256)
SELECT sqlc.arg(name)::text, '1', sqlc.arg(kind)::text, sqlc.arg(spec)::bytea, sqlc.arg(sha256)::text
WHERE NOT EXISTS (SELECT 1 FROM crawlq_spider s WHERE s.name = sqlc.arg(name)::text)
ON CONFLICT (name, version) DO NOTHING;

-- name: ListSpecs :many
-- Every spec name with its newest version and its number of versions. A sequential scan: the
-- table is small (see above).
SELECT DISTINCT ON (name) name, version, kind, created_at, count(*) OVER (PARTITION BY name) AS versions
FROM crawlq_spider ORDER BY name, seq DESC;

-- name: SpecVersions :many
-- One name's versions, oldest first, with when each was pushed and its content's hash. Index:
-- crawlq_spider_latest.
SELECT version, created_at, sha256 FROM crawlq_spider WHERE name = @name ORDER BY seq;

-- name: DeleteSpec :execrows
-- Deletes one version of a name, or every version when version is '', unless a run that has not
-- finished needs it (SpecRunsInUse says which): a version such a run pinned or started with, or,
-- for every version, any such run of the name. Index: the (name, version) unique index, or
-- crawlq_spider_latest for every version; the runs' by the spider's name.
DELETE FROM crawlq_spider s
WHERE s.name = @name AND (sqlc.arg(version)::text = '' OR s.version = sqlc.arg(version)::text)
  AND NOT EXISTS (
    SELECT 1 FROM crawlq_run r LEFT JOIN crawlq_spider_run sr ON sr.run_id = r.id
    WHERE r.spider = @name AND r.state IN ('pending', 'running')
      AND (sqlc.arg(version)::text = '' OR sr.version = s.version));

-- name: SpecRunsInUse :many
-- The runs that have not finished and need a version of name (every version when version is ''):
-- those DeleteSpec will not delete from under. At most 10, oldest first.
SELECT r.id FROM crawlq_run r LEFT JOIN crawlq_spider_run sr ON sr.run_id = r.id
WHERE r.spider = @name AND r.state IN ('pending', 'running')
  AND (sqlc.arg(version)::text = '' OR sr.version = sqlc.arg(version)::text)
ORDER BY r.id LIMIT 10;

-- name: SpecNames :many
-- The names of stored specs. A scan (the table is small).
SELECT DISTINCT name FROM crawlq_spider;
