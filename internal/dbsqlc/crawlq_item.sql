-- Every query on crawlq_item: the items of the Postgres sink (internal/items writes and lists
-- them; internal/events reads a finished run's items to judge it). The table is in
-- internal/migrate/migrations/0003_items.sql; its primary key (run_id, key) serves every read
-- as a range scan of one run. Table names are not schema-qualified: the connection's search_path
-- picks the schema.

-- name: InsertItems :exec
-- Writes one batch in one round trip: the batch travels as five parallel arrays, unnest zips
-- them back into rows, and ON CONFLICT DO NOTHING makes a re-sent item (a retried page, or a
-- retried sink write whose reply was lost) a no-op. The first write of a key wins; a duplicate
-- key inside one batch is also just skipped. Data is sent as text and cast there, so the driver
-- needs no jsonb array codec and Postgres validates each document once. Index: the primary key
-- (the conflict target). The INSERT is in the PL/pgSQL function crawlq_insert_items (migration
-- 0010: every batch of pages runs it, and a function's plan is made once per session).
SELECT crawlq_insert_items(sqlc.arg(run_ids)::bigint[], sqlc.arg(keys)::text[], sqlc.arg(spiders)::text[],
                           sqlc.arg(urls)::text[], sqlc.arg(data)::text[]);

-- name: CountRunItems :one
-- Counts one run's items. Index: the primary key, a range scan.
SELECT count(*) FROM crawlq_item WHERE run_id = @run_id;

-- name: ListRunItems :many
-- The first items of a run in key order, which the primary key serves without a sort; keyset
-- pagination can follow with key > the last.
SELECT run_id, spider, key, url, data FROM crawlq_item
WHERE run_id = @run_id
ORDER BY key
LIMIT sqlc.arg(max_items)::int;

-- name: RunFieldCoverage :many
-- Counts, per field found in a run's items, the items that have it present and non-empty: not
-- JSON null, not a blank string, not an empty array or object (internal/events, read-only). A
-- field present but empty on every item shows as 0. Index: the primary key range of the run;
-- each item's fields are expanded once.
SELECT f.name::text AS field,
       count(*) FILTER (WHERE CASE jsonb_typeof(f.value)
                                  WHEN 'null'   THEN false
                                  WHEN 'string' THEN btrim(f.value #>> '{}') <> ''
                                  WHEN 'array'  THEN jsonb_array_length(f.value) > 0
                                  WHEN 'object' THEN f.value <> '{}'::jsonb
                                  ELSE true
                              END) AS items
FROM crawlq_item i CROSS JOIN LATERAL jsonb_each(i.data) AS f(name, value)
WHERE i.run_id = @run_id
GROUP BY f.name;

-- name: ListRunItemsAfter :many
-- A page of a run's items in key order after a key ("" for the first page): keyset pagination,
-- so reading every item of a large run holds one page at a time (the Scrapyd /items/ answer,
-- crawlq items). Index: the primary key, a range scan from the key.
SELECT key, url, data FROM crawlq_item
WHERE run_id = @run_id AND key > sqlc.arg(after)::text
ORDER BY key
LIMIT sqlc.arg(max_items)::int;
