package spiderstore

// Every query on crawlq_spider, crawlq_project_version and crawlq_spider_run (created by
// migration 0006_spiders.sql) lives in this file.

// sqlLatestSpec is the newest version of a spec. Index: crawlq_spider_latest.
const sqlLatestSpec = `
SELECT name, version, kind, spec, sha256, created_at FROM crawlq_spider
WHERE name = $1 ORDER BY seq DESC LIMIT 1`

// sqlSpecVersion is one version of a spec. Index: the (name, version) unique index.
const sqlSpecVersion = `
SELECT name, version, kind, spec, sha256, created_at FROM crawlq_spider
WHERE name = $1 AND version = $2`

// sqlNextSpecVersion is the version number a new push of a name gets: one more than the number of
// versions it ever had numbered so. Index: crawlq_spider_latest.
const sqlNextSpecVersion = `
SELECT COALESCE(max(version::bigint), 0) + 1 FROM crawlq_spider
WHERE name = $1 AND version ~ '^[0-9]{1,18}$'`

// sqlInsertSpec adds a version; a version already taken makes it return nothing.
const sqlInsertSpec = `
INSERT INTO crawlq_spider (name, version, kind, spec, sha256) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (name, version) DO NOTHING
RETURNING created_at`

// sqlSeedSpec pushes a built-in spec as version 1 of a name that has never been stored. Index:
// crawlq_spider_latest (the NOT EXISTS probe).
const sqlSeedSpec = `
INSERT INTO crawlq_spider (name, version, kind, spec, sha256)
SELECT $1, '1', $2, $3, $4
WHERE NOT EXISTS (SELECT 1 FROM crawlq_spider WHERE name = $1)
ON CONFLICT (name, version) DO NOTHING`

// sqlListSpecs lists every spec name with its newest version and version count. A sequential
// scan of crawlq_spider: the table holds a row per pushed version, thousands at most.
const sqlListSpecs = `
SELECT DISTINCT ON (name) name, version, kind, created_at, count(*) OVER (PARTITION BY name)
FROM crawlq_spider ORDER BY name, seq DESC`

// sqlSpecVersions lists one name's versions, oldest first. Index: crawlq_spider_latest.
const sqlSpecVersions = `SELECT version FROM crawlq_spider WHERE name = $1 ORDER BY seq`

// sqlDeleteSpec deletes one version of a name, or every version when $2 is ”.
const sqlDeleteSpec = `DELETE FROM crawlq_spider WHERE name = $1 AND ($2 = '' OR version = $2)`

// sqlSpecNames lists the names of stored specs.
const sqlSpecNames = `SELECT DISTINCT name FROM crawlq_spider`

// sqlInsertProjectVersion adds a version of a project; a version already uploaded is replaced,
// as Scrapyd's addversion does (a re-deploy of the same version).
const sqlInsertProjectVersion = `
INSERT INTO crawlq_project_version (project, version, spiders, size, sha256, egg, egg_ref)
VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''))
ON CONFLICT (project, version) DO UPDATE
SET spiders = EXCLUDED.spiders, size = EXCLUDED.size, sha256 = EXCLUDED.sha256, egg = EXCLUDED.egg,
    egg_ref = EXCLUDED.egg_ref, created_at = now()`

// sqlProjects lists projects. A scan of crawlq_project_version, one row per uploaded version.
const sqlProjects = `SELECT DISTINCT project FROM crawlq_project_version ORDER BY project`

// sqlProjectVersions lists a project's versions, oldest first (the last is the one runs use).
// Index: crawlq_project_version_latest.
const sqlProjectVersions = `SELECT version FROM crawlq_project_version WHERE project = $1 ORDER BY seq`

// sqlProjectVersion reads one version, or the newest when $2 is ”. Index:
// crawlq_project_version_latest.
const sqlProjectVersion = `
SELECT version, spiders, size, sha256, egg_ref FROM crawlq_project_version
WHERE project = $1 AND ($2 = '' OR version = $2) ORDER BY seq DESC LIMIT 1`

// sqlProjectEgg reads the egg of one version (Postgres backend). Index: (project, version) unique.
const sqlProjectEgg = `SELECT egg, egg_ref FROM crawlq_project_version WHERE project = $1 AND version = $2`

// sqlLatestWithSpider is the newest version of a project that has a spider. Index:
// crawlq_project_version_latest.
const sqlLatestWithSpider = `
SELECT version FROM crawlq_project_version
WHERE project = $1 AND $2 = ANY(spiders) ORDER BY seq DESC LIMIT 1`

// sqlProjectSpiders lists every project's newest version and its spiders. A scan of
// crawlq_project_version, one row per uploaded version.
const sqlProjectSpiders = `
SELECT DISTINCT ON (project) project, version, spiders FROM crawlq_project_version ORDER BY project, seq DESC`

// sqlDeleteProjectVersion deletes one version, or the whole project when $2 is ”, returning
// the egg references an object store must drop.
const sqlDeleteProjectVersion = `
DELETE FROM crawlq_project_version WHERE project = $1 AND ($2 = '' OR version = $2)
RETURNING COALESCE(egg_ref, '')`

// sqlInsertRun records what a run was scheduled with.
const sqlInsertRun = `
INSERT INTO crawlq_spider_run (run_id, project, spider, version, jobid, settings)
VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6::jsonb)
ON CONFLICT (run_id) DO NOTHING`

// sqlGetRun reads a run's record. Index: primary key.
const sqlGetRun = `
SELECT run_id, project, spider, version, COALESCE(jobid, ''), settings, pid FROM crawlq_spider_run WHERE run_id = $1`

// sqlRunByJobID finds a run by the client's job id. Index: the jobid unique index.
const sqlRunByJobID = `SELECT run_id FROM crawlq_spider_run WHERE jobid = $1`

// sqlRunsGet reads the records of many runs. Index: primary key.
const sqlRunsGet = `
SELECT run_id, project, spider, version, COALESCE(jobid, ''), settings, pid FROM crawlq_spider_run WHERE run_id = ANY($1)`

// sqlStartRun records the version a run resolved to (keeping a pinned one) and its pid; a run
// scheduled without a record (crawlq schedule, the plain api) gets one here.
const sqlStartRun = `
INSERT INTO crawlq_spider_run (run_id, project, spider, version, pid) VALUES ($1, $2, $3, $4, NULLIF($5, 0))
ON CONFLICT (run_id) DO UPDATE
SET version = CASE WHEN crawlq_spider_run.version = '' THEN EXCLUDED.version ELSE crawlq_spider_run.version END,
    pid = COALESCE(EXCLUDED.pid, crawlq_spider_run.pid)
RETURNING version`
