-- Every query on crawlq_item: the items of the Postgres sink (internal/items writes and lists
-- them; internal/events reads a finished run's items to judge it). Items are stored a batch to a
-- row in crawlq_item_set, and crawlq_item is the view of them one item a row, the first written of
-- each (run_id, key) (internal/migrate/migrations/0020_item_sets.sql). Every read is a range of
-- the sets' primary key (run_id, id), the run's items expanded and, for an order or a count,
-- sorted or hashed by key. Table names are not schema-qualified: the connection's search_path
-- picks the schema.

-- name: InsertItems :exec
-- Writes one batch in one round trip: the batch travels as five parallel arrays, unnest zips
-- them back into rows, and ON CONFLICT DO NOTHING makes a re-sent item (a retried page, or a
-- retried sink write whose reply was lost) a no-op for readers: the view shows the first write of
-- a key; a duplicate key inside one batch is also just hidden. Data is sent as text and cast
-- there, so the driver needs no jsonb array codec and Postgres validates each document once. One
-- row per run and spider in the batch, no index but the sets' primary key. The INSERT is in the
-- PL/pgSQL function crawlq_insert_items (migrations 0010 and 0020: every batch of pages runs it,
-- and a function's plan is made once per session).
SELECT crawlq_insert_items(sqlc.arg(run_ids)::bigint[], sqlc.arg(keys)::text[], sqlc.arg(spiders)::text[],
                           sqlc.arg(urls)::text[], sqlc.arg(data)::text[]);

-- name: CountRunItems :one
-- Counts one run's items: its distinct keys, hashed from the keys of its sets alone (the view
-- would sort every item with its data). Index: the sets' primary key, a range scan.
SELECT count(*) FROM (SELECT DISTINCT k.key FROM crawlq_item_set s CROSS JOIN LATERAL unnest(s.keys) AS k(key)
                      WHERE s.run_id = @run_id) d;

-- name: RunDuplicateKey :one
-- A key that more than one item of a run was written with (the view shows the first), and the
-- URLs of its first two: an example for the run's log when its items repeat keys. No row: no key
-- repeats. Index: the sets' primary key, a range scan; the run's keys are hashed once.
WITH k AS (
    SELECT u.key, s.urls[u.n] AS url, s.id, u.n
    FROM crawlq_item_set s CROSS JOIN LATERAL unnest(s.keys) WITH ORDINALITY AS u(key, n)
    WHERE s.run_id = @run_id
), d AS (
    SELECT key FROM k GROUP BY key HAVING count(*) > 1 ORDER BY key LIMIT 1
)
SELECT d.key::text AS key, (array_agg(k.url::text ORDER BY k.id, k.n))[1:2]::text[] AS urls
FROM d JOIN k USING (key)
GROUP BY d.key;

-- name: ListRunItems :many
-- The first items of a run in key order (a sort of the run's items); keyset pagination can
-- follow with key > the last.
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
-- so reading every item of a large run holds one page at a time (crawlq items). Each page sorts
-- the run's items after the key; ListAllRunItems reads a whole run with one sort.
SELECT key, url, data FROM crawlq_item
WHERE run_id = @run_id AND key > sqlc.arg(after)::text
ORDER BY key
LIMIT sqlc.arg(max_items)::int;

-- name: ListAllRunItems :many
-- Every item of a run in key order, for a caller that streams the rows (items.PostgresReader,
-- the Scrapyd /items/ answer, through dbsqlc.Each): one sort of the run's items, where reading it
-- page by page would sort what is left of it once a page.
SELECT key, url, data FROM crawlq_item
WHERE run_id = @run_id
ORDER BY key;
