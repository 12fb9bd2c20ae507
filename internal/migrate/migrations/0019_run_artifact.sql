-- 0019_run_artifact: what a failed rendered page looked like (its screenshot and HTML), kept for
-- the operator beside the run's log (owned by internal/artifact; queries in
-- internal/dbsqlc/crawlq_run_artifact.sql). A bounded number per run (internal/artifact.MaxPages).

CREATE TABLE crawlq_run_artifact (
    run_id     bigint NOT NULL,
    name       text NOT NULL,        -- page-<job>-<n>: its files are name.png and name.html
    job_id     bigint NOT NULL,      -- the page job
    attempt    integer NOT NULL,     -- its attempt that failed
    url        text NOT NULL,        -- the page's URL
    error      text NOT NULL,        -- why the page failed
    at         timestamptz NOT NULL, -- when it failed
    png_bytes  integer NOT NULL,     -- size of the screenshot (0: none was taken)
    html_bytes integer NOT NULL,     -- size of the HTML kept (cut at internal/artifact.MaxFileBytes)
    truncated  boolean NOT NULL,     -- the HTML was cut
    png        bytea,                -- the files themselves, when kept in Postgres
    html       bytea,
    location   text NOT NULL,        -- '' (in this row) or s3://bucket/prefix/ holding name.png, name.html
    PRIMARY KEY (run_id, name)
);
