-- 0006_spiders: spiders as versioned data (owned by internal/spiderstore; every query on its tables
-- is in internal/dbsqlc, one .sql file per table) and run logs (owned by internal/runlog; internal/dbsqlc/crawlq_run_log.sql).

-- One row per pushed version of a spider spec (declarative or command). The newest row of a name
-- (highest seq) is what a run of that name uses unless it pinned a version.
CREATE TABLE crawlq_spider (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text NOT NULL,
    version    text NOT NULL,
    kind       text NOT NULL,          -- declarative | command
    spec       bytea NOT NULL,         -- the spec as pushed (YAML or JSON), validated at push
    sha256     text NOT NULL,          -- of spec: a push of unchanged content adds no version
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (name, version)
);
-- The newest version of a name, and listings by name.
CREATE INDEX crawlq_spider_latest ON crawlq_spider (name, seq DESC);

-- One row per uploaded version of a Scrapy project (Scrapyd's addversion): its spiders, and its
-- egg, held here (egg) or in an object store (egg_ref) by the configured backend.
CREATE TABLE crawlq_project_version (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project    text NOT NULL,
    version    text NOT NULL,
    spiders    text[] NOT NULL,
    size       bigint NOT NULL,
    sha256     text NOT NULL,
    egg        bytea,                  -- the Postgres egg backend
    egg_ref    text,                   -- the S3 egg backend: the object key
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project, version)
);
-- The newest version of a project, and listings by project.
CREATE INDEX crawlq_project_version_latest ON crawlq_project_version (project, seq DESC);

-- What a run of a stored spider was scheduled with beyond crawlq_run (a Scrapyd jobid, a pinned
-- version, Scrapy settings) and what it ran (the version resolved, the command's pid).
CREATE TABLE crawlq_spider_run (
    run_id     bigint PRIMARY KEY,
    project    text NOT NULL DEFAULT '',
    spider     text NOT NULL,
    version    text NOT NULL DEFAULT '', -- pinned at schedule, else filled in when the run starts
    jobid      text UNIQUE,              -- the client's own job id (Scrapyd's jobid), if it gave one
    settings   jsonb NOT NULL DEFAULT '{}', -- Scrapy settings (setting=K=V), a JSON object of strings
    pid        integer,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- A run's log lines (stdout and stderr of a command spider), in order of id.
CREATE TABLE crawlq_run_log (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id bigint NOT NULL,
    at     timestamptz NOT NULL DEFAULT now(),
    line   text NOT NULL
);
-- Reading one run's log from a cursor.
CREATE INDEX crawlq_run_log_run ON crawlq_run_log (run_id, id);
