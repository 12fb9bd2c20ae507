-- Every query on crawlq_url_state and crawlq_item_change: the URL state of spiders that revisit
-- (internal/urlstate; the tables are in internal/migrate/migrations/0016_url_state.sql).

-- name: GetURLStates :many
-- What each of urls answered when a run of the spider's line last reached it (no row: none did).
-- Many URLs at once, so the pages a worker starts together read their states in one round trip
-- (urlstate.Loader). Index: the primary key, one lookup per URL: the lateral LIMIT keeps the URL
-- an index condition (with url = ANY (urls) a planner that thinks the table small, as before its
-- first analyze, reads the whole line and filters it: 16 ms a call at 10,000 URLs).
SELECT u.url, u.run_id, u.fetched_at, u.status, u.etag, u.last_modified, u.body_hash, u.links, u.items, u.interval_s
FROM unnest(sqlc.arg(urls)::text[]) AS k(url)
CROSS JOIN LATERAL (
    SELECT s.url, s.run_id, s.fetched_at, s.status, s.etag, s.last_modified, s.body_hash, s.links, s.items, s.interval_s
    FROM crawlq_url_state s
    WHERE s.spider = @spider AND s.line = @line AND s.url = k.url
    LIMIT 1
) AS u;

-- name: GetURLDue :many
-- When each of urls was last fetched, what it answered and its adaptive interval: what orders the
-- page jobs of an adaptive run by how likely each page changed (internal/crawl, priority.go),
-- without the links and items GetURLStates reads. Index: the primary key, one lookup per URL (the
-- lateral LIMIT, as in GetURLStates).
SELECT u.url, u.fetched_at, u.status, u.interval_s
FROM unnest(sqlc.arg(urls)::text[]) AS k(url)
CROSS JOIN LATERAL (
    SELECT s.url, s.fetched_at, s.status, s.interval_s
    FROM crawlq_url_state s
    WHERE s.spider = @spider AND s.line = @line AND s.url = k.url
    LIMIT 1
) AS u;

-- name: RecordURLStates :exec
-- Records, in the transaction that finishes a batch of pages, what each page saw (states), the
-- items it found new, changed or gone (changes) and the counts of each (added to the runs' stats
-- as kinds items_new, items_changed, items_unchanged, items_gone). A page found as it was
-- (touches: a 304, the same body, an adaptive page not due) rewrites only what moves (the run,
-- the times, the validators), not its links and items. Each record claims its URL for its run:
-- a URL some run already recorded this run (another page's job handled it within its own, or
-- the other way round, at the same moment) is not written again, and only the records written
-- count their items, their changes and, for a touch with a kind, its page outcome (and, for a
-- page walked within another's job, a count of kind walked); so a URL reached twice in a run
-- counts once. runs lists the batch's
-- runs: each gets its items_unchanged row, 0 or not, which marks a run that counts changes. now
-- is the crawler's clock (fetched_at, and keep_until from it: retention's clock is the same).
-- Each argument is a JSON array, so one statement carries any batch (the CTEs run to completion
-- though nothing reads some). Index: the primary keys (the conflict targets, the touches' join).
WITH t AS (
    UPDATE crawlq_url_state u
    SET run_id = x.run_id, fetched_at = CASE WHEN x.fetched THEN sqlc.arg(now)::timestamptz ELSE u.fetched_at END,
        keep_until = sqlc.arg(now)::timestamptz + make_interval(secs => x.keep_s), etag = x.etag,
        last_modified = x.last_modified, interval_s = x.interval_s
    FROM jsonb_to_recordset(sqlc.arg(touches)::text::jsonb) AS x(spider text, line text, url text, run_id bigint,
         fetched boolean, keep_s double precision, etag text, last_modified text, interval_s integer,
         unchanged integer, kind text, bytes bigint)
    WHERE u.spider = x.spider AND u.line = x.line AND u.url = x.url AND u.run_id <> x.run_id
    RETURNING u.spider, u.line, u.url, u.run_id
), s AS (
    INSERT INTO crawlq_url_state (spider, line, url, run_id, fetched_at, keep_until, status, etag,
                                  last_modified, body_hash, links, items, interval_s)
    SELECT x.spider, x.line, x.url, x.run_id,
           CASE WHEN x.fetched THEN sqlc.arg(now)::timestamptz ELSE x.fetched_at END,
           sqlc.arg(now)::timestamptz + make_interval(secs => x.keep_s), x.status, x.etag, x.last_modified, x.body_hash,
           x.links, x.items, x.interval_s
    FROM jsonb_to_recordset(sqlc.arg(states)::text::jsonb) AS x(spider text, line text, url text, run_id bigint,
         fetched boolean, fetched_at timestamptz, keep_s double precision, status integer, etag text,
         last_modified text, body_hash bigint, links jsonb, items jsonb, interval_s integer)
    ON CONFLICT (spider, line, url) DO UPDATE
    SET run_id = EXCLUDED.run_id, fetched_at = EXCLUDED.fetched_at, keep_until = EXCLUDED.keep_until,
        status = EXCLUDED.status, etag = EXCLUDED.etag, last_modified = EXCLUDED.last_modified,
        body_hash = EXCLUDED.body_hash, links = EXCLUDED.links, items = EXCLUDED.items,
        interval_s = EXCLUDED.interval_s
    WHERE crawlq_url_state.run_id <> EXCLUDED.run_id
    RETURNING crawlq_url_state.spider, crawlq_url_state.line, crawlq_url_state.url, crawlq_url_state.run_id
), tc AS (
    -- The touches written, with what each adds to its run's stats.
    SELECT (e.v->>'run_id')::bigint AS run_id, e.v->>'url' AS url, (e.v->>'unchanged')::int AS unchanged,
           e.v->>'kind' AS kind, (e.v->>'bytes')::bigint AS bytes, (e.v->>'walked')::boolean AS walked
    FROM jsonb_array_elements(sqlc.arg(touches)::text::jsonb) AS e(v)
    WHERE EXISTS (SELECT 1 FROM t WHERE t.spider = e.v->>'spider' AND t.line = e.v->>'line' AND t.url = e.v->>'url')
), claimed AS (
    SELECT tc.run_id, tc.url, tc.unchanged AS n_unchanged, 0 AS n_new, 0 AS n_changed, 0 AS n_gone FROM tc
    UNION ALL
    SELECT (e.v->>'run_id')::bigint, e.v->>'url', (e.v->>'n_unchanged')::int, (e.v->>'n_new')::int,
           (e.v->>'n_changed')::int, (e.v->>'n_gone')::int
    FROM jsonb_array_elements(sqlc.arg(states)::text::jsonb) AS e(v)
    WHERE EXISTS (SELECT 1 FROM s WHERE s.spider = e.v->>'spider' AND s.line = e.v->>'line' AND s.url = e.v->>'url')
), c AS (
    INSERT INTO crawlq_item_change (run_id, key, change, url)
    SELECT y.run_id, y.key, y.change, y.url
    FROM jsonb_to_recordset(sqlc.arg(changes)::text::jsonb) AS y(run_id bigint, key text, change text, url text)
    WHERE EXISTS (SELECT 1 FROM claimed WHERE claimed.run_id = y.run_id AND claimed.url = y.url)
    ON CONFLICT DO NOTHING
    RETURNING 1
)
INSERT INTO crawlq_run_stat (run_id, pages, bytes, kind, n)
SELECT r.run_id, 0, 0, k.kind, k.n
FROM jsonb_array_elements_text(sqlc.arg(runs)::text::jsonb) AS r0(id)
CROSS JOIN LATERAL (SELECT r0.id::bigint AS run_id) AS r
CROSS JOIN LATERAL (
    SELECT coalesce(sum(n_new), 0)::int AS nn, coalesce(sum(n_changed), 0)::int AS nc,
           coalesce(sum(n_unchanged), 0)::int AS nu, coalesce(sum(n_gone), 0)::int AS ng
    FROM claimed WHERE claimed.run_id = r.run_id
) AS m
CROSS JOIN LATERAL (VALUES ('items_new', m.nn), ('items_changed', m.nc), ('items_unchanged', m.nu), ('items_gone', m.ng)) AS k(kind, n)
WHERE k.n > 0 OR k.kind = 'items_unchanged' -- that one always: it marks a run that counts changes
UNION ALL
SELECT tc.run_id, count(*)::int, sum(tc.bytes)::bigint, tc.kind, count(*)::int
FROM tc WHERE tc.kind <> '' GROUP BY tc.run_id, tc.kind
UNION ALL -- and how many of the run's pages were walked, not jobs (kind walked, no page of its own)
SELECT tc.run_id, 0, 0, 'walked', count(*)::int
FROM tc WHERE tc.walked GROUP BY tc.run_id;

-- name: TouchURLStates :exec
-- Records, in the transaction that finishes them, pages of one run found as they were (a 304,
-- the same body, an adaptive page not due; a recrawl's every page): only what moves is
-- rewritten (the run, the times, the validators), not the links and items, and each touch claims
-- its URL for the run as RecordURLStates' do (a URL the run already recorded is not written
-- again and adds nothing). The touches written add their unchanged items (items_unchanged, a
-- row always: it marks a run that counts changes), their page outcomes by kind and how many
-- were walked to the run's stats. A recrawl sends one of these a walk, so it is lean: the
-- touches are parallel arrays, one element a page (spider, line and run are arguments), which
-- the server reads for about a quarter less CPU a row than the JSON array RecordURLStates takes
-- (a recrawl's every page is a touch). Its rows are a materialized CTE whose spider and line the
-- planner does not know, over arrays it cannot count (passed through a subquery it does not
-- flatten): it then looks each URL up by the primary key, where with arrays of known length, or
-- the line as a constant, it scans the whole line to hash it (on a table it has no statistics of
-- yet: a new spider's, or the bench's). now is the crawler's clock, as in RecordURLStates.
-- Index: the primary key, a lookup a touch.
WITH x AS MATERIALIZED (
    SELECT sqlc.arg(spider)::text AS spider, sqlc.arg(line)::text AS line, k.url, k.fetched, k.keep_s, k.etag,
           k.last_modified, k.interval_s, k.unchanged, k.kind, k.bytes, k.walked
    FROM (
        SELECT sqlc.arg(urls)::text[] AS urls, sqlc.arg(fetched)::boolean[] AS fetched, sqlc.arg(keep_s)::float8[] AS keep_s,
               sqlc.arg(etags)::text[] AS etags, sqlc.arg(last_modified)::text[] AS last_modified,
               sqlc.arg(interval_s)::int[] AS interval_s, sqlc.arg(unchanged)::int[] AS unchanged,
               sqlc.arg(kinds)::text[] AS kinds, sqlc.arg(bytes)::bigint[] AS bytes, sqlc.arg(walked)::boolean[] AS walked
        OFFSET 0 -- keeps the arrays from the planner's count
    ) AS a
    CROSS JOIN LATERAL ROWS FROM (unnest(a.urls), unnest(a.fetched), unnest(a.keep_s), unnest(a.etags), unnest(a.last_modified),
        unnest(a.interval_s), unnest(a.unchanged), unnest(a.kinds), unnest(a.bytes), unnest(a.walked))
        AS k(url, fetched, keep_s, etag, last_modified, interval_s, unchanged, kind, bytes, walked)
), t AS (
    UPDATE crawlq_url_state u
    SET run_id = sqlc.arg(run_id)::bigint, fetched_at = CASE WHEN x.fetched THEN sqlc.arg(now)::timestamptz ELSE u.fetched_at END,
        keep_until = sqlc.arg(now)::timestamptz + make_interval(secs => x.keep_s), etag = x.etag,
        last_modified = x.last_modified, interval_s = x.interval_s
    FROM x
    WHERE u.spider = x.spider AND u.line = x.line AND u.url = x.url AND u.run_id <> sqlc.arg(run_id)::bigint
    RETURNING u.url
), w AS (
    SELECT x.unchanged, x.kind, x.bytes, x.walked FROM x JOIN t ON t.url = x.url
)
INSERT INTO crawlq_run_stat (run_id, pages, bytes, kind, n)
SELECT r.run_id, k.pages, k.bytes, k.kind, k.n
FROM (SELECT sqlc.arg(run_id)::bigint AS run_id) AS r
CROSS JOIN LATERAL (
    SELECT 0 AS pages, 0::bigint AS bytes, 'items_unchanged' AS kind, coalesce(sum(w.unchanged), 0)::int AS n FROM w
    UNION ALL
    SELECT count(*)::int, sum(w.bytes)::bigint, w.kind, count(*)::int FROM w WHERE w.kind <> '' GROUP BY w.kind
    UNION ALL -- and how many of the run's pages were walked, not jobs (kind walked, no page of its own)
    SELECT 0, 0, 'walked', count(*)::int FROM w WHERE w.walked HAVING count(*) > 0
) AS k;

-- name: SweepGoneItems :one
-- At the end of a run that reached all it could, the items of the line's URLs no run reached
-- since an earlier one are gone: recorded as such for the run, counted (items_gone), and cleared
-- from the state so no later run counts them again. Run again, it finds nothing: exactly once.
-- The validators and body hash go with the items (and an adaptive page is due at once): the state
-- no longer says what the body yielded, so when a later run reaches the URL again it fetches and
-- parses it, and its items come back as new instead of a 304 that would keep them gone.
-- Index: the primary key, a range scan of the line.
WITH old AS (
    SELECT u.url, u.items FROM crawlq_url_state u
    WHERE u.spider = @spider AND u.line = @line AND u.run_id < @run_id AND u.items <> '{}'::jsonb
    FOR UPDATE
), cleared AS (
    UPDATE crawlq_url_state u SET items = '{}'::jsonb, etag = '', last_modified = '', body_hash = 0, interval_s = 0
    FROM old WHERE u.spider = @spider AND u.line = @line AND u.url = old.url
    RETURNING 1
), c AS (
    INSERT INTO crawlq_item_change (run_id, key, change, url)
    SELECT @run_id, k.key, 'gone', old.url FROM old, jsonb_object_keys(old.items) AS k(key)
    ON CONFLICT DO NOTHING
    RETURNING 1
), st AS (
    INSERT INTO crawlq_run_stat (run_id, kind, n)
    SELECT @run_id, 'items_gone', count(*) FROM c HAVING count(*) > 0
    RETURNING n
)
SELECT COALESCE((SELECT sum(n) FROM st), 0)::bigint AS gone, (SELECT count(*) FROM cleared)::bigint AS urls;

-- name: CountRunGonePages :one
-- The pages of the line that run found gone (a 404 or a 410 recorded in their state by that run).
-- Index: the primary key, a range scan of the line.
SELECT count(*)::bigint FROM crawlq_url_state
WHERE spider = @spider AND line = @line AND run_id = @run_id AND status IN (404, 410);

-- name: ListItemChanges :many
-- A run's new, changed and gone items, by change then key, after (change, key) for the next
-- page. Index: the primary key, a range scan of the run.
SELECT key, change, url FROM crawlq_item_change
WHERE run_id = @run_id AND (change, key) > (sqlc.arg(after_change)::text, sqlc.arg(after_key)::text)
ORDER BY change, key
LIMIT sqlc.arg(max_rows)::int;

-- name: DeleteExpiredURLStates :execrows
-- Removes up to max_rows URL states no run reached before their keep_until (state_ttl). A
-- sequential scan, bounded by the limit: maintenance runs it a batch at a time.
DELETE FROM crawlq_url_state
WHERE ctid = ANY (ARRAY(SELECT u.ctid FROM crawlq_url_state u WHERE u.keep_until < @now LIMIT sqlc.arg(max_rows)::int));
