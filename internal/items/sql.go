package items

// Every query on crawlq_item (created by migration 0003_items.sql) lives in this file.
// Table names are not schema-qualified: the connection's search_path picks the schema.

// insertItemsSQL writes one batch in one round trip: the batch travels as five parallel
// arrays, unnest zips them back into rows, and ON CONFLICT DO NOTHING makes a re-sent
// item (a retried page, or a retried sink write whose reply was lost) a no-op. The first
// write of a key wins; a duplicate key inside one batch is also just skipped.
//
// Data is sent as text and cast here, so the driver needs no jsonb array codec and
// Postgres validates each document once.
const insertItemsSQL = `
INSERT INTO crawlq_item (run_id, key, spider, url, data)
SELECT u.run_id, u.key, u.spider, u.url, u.data::jsonb
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[])
     AS u(run_id, key, spider, url, data)
ON CONFLICT (run_id, key) DO NOTHING`

// countItemsSQL counts one run's items: a range scan of the primary key.
const countItemsSQL = `
SELECT count(*) FROM crawlq_item WHERE run_id = $1`

// listItemsSQL returns the first items of a run in key order, which the primary key
// index serves without a sort; keyset pagination can follow with key > $last.
const listItemsSQL = `
SELECT run_id, spider, key, url, data
FROM crawlq_item
WHERE run_id = $1
ORDER BY key
LIMIT $2`
