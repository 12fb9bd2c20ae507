-- Every query on crawlq_project_version: uploaded Scrapy projects (eggs), one row per version
-- (internal/spiderstore; the table is in internal/migrate/migrations/0006_spiders.sql). Versions
-- are ordered by seq, the upload order; the last is the one runs use.

-- name: InsertProjectVersion :exec
-- Adds a version of a project; a version already uploaded is replaced, as Scrapyd's addversion
-- does (a re-deploy of the same version). The egg is inline (egg) or in an object store (egg_ref,
-- '' for none). Index: the (project, version) unique index (the conflict target).
INSERT INTO crawlq_project_version (project, version, spiders, size, sha256, egg, egg_ref)
VALUES (@project, @version, @spiders, @size, @sha256, @egg, NULLIF(@egg_ref::text, ''))
ON CONFLICT (project, version) DO UPDATE
SET spiders = EXCLUDED.spiders, size = EXCLUDED.size, sha256 = EXCLUDED.sha256, egg = EXCLUDED.egg,
    egg_ref = EXCLUDED.egg_ref, created_at = now();

-- name: Projects :many
-- The uploaded projects. A scan: one row per uploaded version, few.
SELECT DISTINCT project FROM crawlq_project_version ORDER BY project;

-- name: ProjectVersions :many
-- A project's versions in upload order (internal/spiderstore sorts them as Scrapyd does). Index:
-- crawlq_project_version_latest.
SELECT version FROM crawlq_project_version WHERE project = @project ORDER BY seq;

-- name: ProjectVersion :one
-- One version of a project (internal/spiderstore finds the highest by ProjectVersions). Index:
-- the (project, version) unique index.
SELECT version, spiders, size, sha256 FROM crawlq_project_version
WHERE project = @project AND version = @version;

-- name: ProjectEgg :one
-- The egg of one version: inline (the Postgres backend) or its object key (egg_ref, '' when
-- inline). Index: the (project, version) unique index.
SELECT egg, COALESCE(egg_ref, '')::text AS egg_ref FROM crawlq_project_version
WHERE project = @project AND version = @version;

-- name: ProjectVersionSpiders :many
-- A project's versions and their spiders (internal/spiderstore picks the highest that has a
-- spider, in Scrapyd's order). Index: crawlq_project_version_latest.
SELECT version, spiders FROM crawlq_project_version WHERE project = @project ORDER BY seq;

-- name: ProjectSpiders :many
-- Every project's versions and their spiders (internal/spiderstore picks each project's highest,
-- in Scrapyd's order). A scan: one row per uploaded version, few.
SELECT project, version, spiders FROM crawlq_project_version ORDER BY project, seq;

-- name: DeleteProjectVersion :many
-- Deletes one version, or the whole project when version is '', returning the object keys of
-- the eggs an object store must drop ('' for an inline egg). Index: the (project, version) unique
-- index, or crawlq_project_version_latest for the whole project.
DELETE FROM crawlq_project_version
WHERE project = @project AND (sqlc.arg(version)::text = '' OR version = sqlc.arg(version)::text)
RETURNING COALESCE(egg_ref, '')::text AS egg_ref;
