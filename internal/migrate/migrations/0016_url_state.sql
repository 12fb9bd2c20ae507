-- 0016_url_state: what a spider that keeps URL state (revisit changed_only or adaptive; owned by
-- internal/urlstate, queries in internal/dbsqlc/crawlq_url_state.sql) knows of each URL across
-- its runs, and which items each such run found new, changed or gone.

-- One row per URL a run of the spider reached, per line (spider.StateLine: a hash of the
-- extraction rules, so a spec version that extracts differently starts afresh). Written in the
-- transaction that finishes the page, so it is exactly what the finished pages saw. fillfactor
-- leaves room for HOT updates: a recrawl rewrites every row, and no indexed column changes.
CREATE TABLE crawlq_url_state (
    spider        text NOT NULL,
    line          text NOT NULL,
    url           text NOT NULL,
    run_id        bigint NOT NULL,      -- the last run that reached it
    fetched_at    timestamptz NOT NULL, -- when it was last requested (an adaptive skip keeps it)
    keep_until    timestamptz NOT NULL, -- retention removes it after this (spec state_ttl)
    status        integer NOT NULL,     -- the last full answer's status (200, 404, ...)
    etag          text NOT NULL DEFAULT '',
    last_modified text NOT NULL DEFAULT '',
    body_hash     bigint NOT NULL DEFAULT 0,       -- of the last body (0: none)
    links         jsonb NOT NULL DEFAULT '[]',     -- the links the page yielded, canonical
    items         jsonb NOT NULL DEFAULT '{}',     -- item key -> hash of its fields
    interval_s    integer NOT NULL DEFAULT 0,      -- adaptive: seconds until it is due again
    PRIMARY KEY (spider, line, url)
) WITH (fillfactor = 80);

-- The items a run found new, changed or gone against the state before it (crawlq items ID
-- --changes). Unchanged items are only counted (crawlq_run_stat, kind items_unchanged).
CREATE TABLE crawlq_item_change (
    run_id bigint NOT NULL,
    key    text NOT NULL,
    change text NOT NULL CHECK (change IN ('new', 'changed', 'gone')),
    url    text NOT NULL,
    PRIMARY KEY (run_id, key, change)
);
