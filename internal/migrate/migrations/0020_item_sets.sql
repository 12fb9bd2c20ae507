-- 0020_item_sets: the items a batch writes are one row, not one row per item. A crawl writes its
-- pages' items in the transaction that completes them, a group commit of up to 256 pages, so an
-- item row per leaf page was a third of the rows a crawled page wrote (with its job's insert and
-- completion); now the group's items of one run and spider are one crawlq_item_set row.
--
-- crawlq_item stays, as a view with the table's columns, so every reader (internal/items,
-- internal/events, crawlq items, the api, Scrapyd's /items/) reads what it read. It keeps the
-- table's identity rule: one item per (run_id, key), the first written. A key written again (a
-- retried page, two pages emitting one key) is kept in its later set and hidden by the view,
-- which takes per key the item of the earliest set, then the earliest in its set: what ON
-- CONFLICT DO NOTHING on the old primary key kept.
--
-- What it costs: a run's reads expand and sort the run's sets (one index range by run_id), where
-- the old primary key read a key range. Counting and listing a 10,000-item run take a few
-- milliseconds; reading a run page by page in key order costs a sort of the run's remaining
-- items per page.

ALTER TABLE crawlq_item RENAME TO crawlq_item_v19;

-- crawlq_item_all_objects: every element of data is a JSON object (the old table's CHECK per row).
CREATE FUNCTION crawlq_item_all_objects(data jsonb[]) RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(bool_and(d IS NOT NULL AND jsonb_typeof(d) = 'object'), true) FROM unnest(data) AS d
$$;

CREATE TABLE crawlq_item_set (
    run_id     bigint      NOT NULL,
    id         bigint      GENERATED ALWAYS AS IDENTITY,
    spider     text        NOT NULL,
    -- Parallel arrays, one element per item, in the order written.
    keys       text[]      NOT NULL CHECK (array_position(keys, NULL) IS NULL),
    urls       text[]      NOT NULL CHECK (array_position(urls, NULL) IS NULL),
    data       jsonb[]     NOT NULL CHECK (crawlq_item_all_objects(data)),
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK (cardinality(keys) = cardinality(urls) AND cardinality(keys) = cardinality(data)),
    -- run_id leads: counting, listing and deleting a run's items is a range of this one index.
    PRIMARY KEY (run_id, id)
);

-- Existing items move in sets of 1,000 per run and spider, in key order.
INSERT INTO crawlq_item_set (run_id, spider, keys, urls, data, created_at)
SELECT run_id, spider, array_agg(key ORDER BY key), array_agg(url ORDER BY key), array_agg(data ORDER BY key), min(created_at)
FROM (SELECT i.*, (row_number() OVER (PARTITION BY run_id, spider ORDER BY key) - 1) / 1000 AS chunk FROM crawlq_item_v19 i) c
GROUP BY run_id, spider, chunk
ORDER BY run_id, min(key);

DROP TABLE crawlq_item_v19;

-- One row per (run_id, key): the first written (earliest set, then earliest in it). A reader's
-- run_id and key conditions reach the sets' index through DISTINCT ON.
CREATE VIEW crawlq_item AS
SELECT DISTINCT ON (s.run_id, u.key) s.run_id, u.key::text AS key, s.spider, u.url::text AS url, u.data::jsonb AS data, s.created_at
FROM crawlq_item_set s CROSS JOIN LATERAL unnest(s.keys, s.urls, s.data) WITH ORDINALITY AS u(key, url, data, n)
ORDER BY s.run_id, u.key, s.id, u.n;

-- An item inserted into the view (a fixture, a hand repair) becomes a set of one.
CREATE FUNCTION crawlq_item_insert_one() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO crawlq_item_set (run_id, spider, keys, urls, data, created_at)
    VALUES (NEW.run_id, NEW.spider, ARRAY[NEW.key], ARRAY[NEW.url], ARRAY[NEW.data], coalesce(NEW.created_at, now()));
    RETURN NEW;
END
$$;
CREATE TRIGGER crawlq_item_insert INSTEAD OF INSERT ON crawlq_item FOR EACH ROW EXECUTE FUNCTION crawlq_item_insert_one();

-- items.Postgres: a batch of items becomes one set per run and spider in it, the items in the
-- batch's order (so the first of a key in the batch is the one the view shows).
CREATE OR REPLACE FUNCTION crawlq_insert_items(p_run_ids bigint[], p_keys text[], p_spiders text[], p_urls text[], p_data text[])
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    INSERT INTO crawlq_item_set (run_id, spider, keys, urls, data)
    SELECT u.run_id, u.spider, array_agg(u.key ORDER BY u.n), array_agg(u.url ORDER BY u.n), array_agg(u.data::jsonb ORDER BY u.n)
    FROM unnest(p_run_ids, p_keys, p_spiders, p_urls, p_data) WITH ORDINALITY AS u(run_id, key, spider, url, data, n)
    GROUP BY u.run_id, u.spider
    ORDER BY min(u.n);
END
$$;
