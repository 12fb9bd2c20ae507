-- crawlq_item holds the items spiders extract, one row per (run, key), written by the
-- Postgres sink of internal/items (its queries are in internal/dbsqlc/crawlq_item.sql).
--
-- The primary key (run_id, key) is the item's identity and the whole of the sink's
-- idempotency: a page job that is retried after a crash or a lost lease re-emits the same
-- keys, and INSERT ... ON CONFLICT (run_id, key) DO NOTHING turns the second write into a
-- no-op, so the pipeline can be at-least-once while the table stays exactly-once.
-- run_id leads so that counting, listing and deleting one run's items are range scans of
-- this one index, with no second index to maintain on the hot insert path.
--
-- There is deliberately no foreign key to the run table: items are inserted in large
-- batches on the hot path, and run retention deletes items explicitly by run_id.
CREATE TABLE crawlq_item (
    run_id     bigint      NOT NULL,
    key        text        NOT NULL,
    spider     text        NOT NULL,
    url        text        NOT NULL,
    data       jsonb       NOT NULL CHECK (jsonb_typeof(data) = 'object'),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, key)
);
