-- 0010_hot_statements: the statements that run for every job and every crawled page, as PL/pgSQL
-- functions: a claim and a completion of the queue, and the four statements a crawled page runs.
--
-- Why functions: in pgx's exec mode (every Lambda's, and the one that is safe behind RDS Proxy)
-- each statement is parsed, analysed and planned on every call; nothing is prepared per
-- connection. A crawl sends a completion batch, its stats and items, and each page's new links as
-- large CTEs, and on the chain bench site ~30% of the Postgres server's CPU went to parsing and
-- planning them (perf). Even prepared (pgx's cache_statement mode) they were planned again on
-- every call: their row estimates come from the arrays they are given, so the plan cache keeps
-- choosing custom plans. A PL/pgSQL function's statements are planned once per session and kept
-- (SPI's plan cache), and the call that reaches them is a one-line statement, so both modes get
-- one plan per session, with no state the client must track. plan_cache_mode =
-- force_generic_plan keeps that plan (the queue bench's work ran 24% faster with generic plans).
--
-- A generic plan is made once, on whatever the statistics say then, and kept until the table is
-- next analysed. So every row these statements read is found by key, whatever the statistics:
-- enable_seqscan = off (a plan made while a table is new and nearly empty would scan it whole),
-- and completions look each lease up by its id (see crawlq_complete_jobs).
--
-- The queries of internal/dbsqlc that call them (ClaimJobs, CompleteJobs, CompleteJobsOrAbort,
-- InsertHeldJobs, AddRunStats, InsertItems) keep their documentation; the statements are here.
-- Changing one means a new migration with CREATE OR REPLACE FUNCTION.

-- queue.Client.Claim: leases up to p_max_jobs due jobs of p_queue, highest priority first, then
-- oldest run_at (see ClaimJobs).
CREATE FUNCTION crawlq_claim_jobs(p_queue text, p_max_jobs int, p_now timestamptz, p_lease_ms bigint,
                                  p_lease_token bigint, p_worker text)
RETURNS SETOF crawlq_job LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
BEGIN
    RETURN QUERY
    WITH picked AS (
        SELECT j.id FROM crawlq_job j
        WHERE j.state = 'available' AND j.queue = p_queue
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT p_max_jobs
        FOR UPDATE SKIP LOCKED
    ), claimed AS (
        UPDATE crawlq_job j
        SET state = 'running', attempt = j.attempt + 1,
            lease_until = coalesce(p_now, now()) + p_lease_ms * interval '1 millisecond',
            lease_token = p_lease_token, worker = p_worker, started_at = coalesce(p_now, now())
        WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
        RETURNING j.*
    ), cnt AS (
        INSERT INTO crawlq_job_count_delta (queue, state, n)
        SELECT c.queue, c.state, count(*) FROM claimed c GROUP BY c.queue, c.state
        UNION ALL
        SELECT c.queue, 'available'::crawlq_job_state, -count(*) FROM claimed c GROUP BY c.queue
    )
    SELECT * FROM claimed;
END
$$;

-- queue.Client.Complete: finishes held jobs as succeeded and returns the leases it finished; the
-- others were lost (see CompleteJobs). Each lease is looked up by its id, in id order (the lock
-- order of every statement on several jobs). The state is checked outside the lookup (OFFSET 0
-- keeps it there): inside, a plan made while the table is nearly empty walks the partial index of
-- running jobs (crawlq_job_lease) for every lease, and the cached plan keeps doing so as the
-- table grows.
CREATE FUNCTION crawlq_complete_jobs(p_ids bigint[], p_tokens bigint[], p_now timestamptz)
RETURNS TABLE (id bigint, token bigint) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH held AS (
        SELECT h.id, l.token
        FROM (SELECT l.id, l.token FROM unnest(p_ids, p_tokens) AS l(id, token) ORDER BY l.id) l,
        LATERAL (SELECT j.id, j.state FROM crawlq_job j
                 WHERE j.id = l.id AND j.lease_token = l.token
                 OFFSET 0 FOR UPDATE) h
        WHERE h.state = 'running'
    ), done AS (
        UPDATE crawlq_job j
        SET state = 'succeeded', finished_at = coalesce(p_now, now()), lease_until = NULL, lease_token = NULL
        WHERE j.id = ANY (ARRAY(SELECT held.id FROM held))
        RETURNING j.id, j.queue
    ), cnt AS (
        INSERT INTO crawlq_job_count_delta (queue, state, n)
        SELECT d.queue, 'succeeded'::crawlq_job_state, count(*) FROM done d GROUP BY d.queue
        UNION ALL
        SELECT d.queue, 'running'::crawlq_job_state, -count(*) FROM done d GROUP BY d.queue
    )
    SELECT d.id, h.token FROM done d JOIN held h ON h.id = d.id;
END
$$;

-- crawl/finish.go and queue.Tx: completes held jobs as succeeded, or aborts the transaction through
-- crawlq_lease_lost naming the jobs whose lease was lost (see CompleteJobsOrAbort): crawlq_complete_jobs,
-- then the check.
CREATE FUNCTION crawlq_complete_jobs_or_abort(p_ids bigint[], p_tokens bigint[], p_now timestamptz)
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
    done bigint[];
    lost bigint[];
BEGIN
    SELECT array_agg(c.id) INTO done FROM crawlq_complete_jobs(p_ids, p_tokens, p_now) AS c;
    SELECT array_agg(l.id) INTO lost FROM unnest(p_ids) AS l(id)
    WHERE l.id NOT IN (SELECT unnest(coalesce(done, '{}')));
    IF lost IS NOT NULL THEN
        PERFORM crawlq_lease_lost(lost);
    END IF;
END
$$;

-- queue.Reservation: inserts jobs already running, leased to the process that found them, skipping
-- those whose once key was used before (see InsertHeldJobs).
CREATE FUNCTION crawlq_insert_held_jobs(p_queues text[], p_kinds text[], p_priorities smallint[], p_max_attempts int[],
                                        p_parent_ids bigint[], p_args text[], p_hashes uuid[],
                                        p_lease_ms bigint, p_lease_token bigint, p_worker text, p_now timestamptz)
RETURNS SETOF crawlq_job LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
BEGIN
    RETURN QUERY
    WITH src AS (
        SELECT unnest(p_queues) AS q, unnest(p_kinds) AS k, unnest(p_priorities) AS p, unnest(p_max_attempts) AS m,
               unnest(p_parent_ids) AS par, unnest(p_args) AS a, unnest(p_hashes) AS h,
               generate_series(1, cardinality(p_queues)) AS o
    ), once AS (
        INSERT INTO crawlq_job_once (parent_id, h)
        SELECT par, h FROM src WHERE h IS NOT NULL
        ON CONFLICT DO NOTHING
        RETURNING parent_id, h
    ), ins AS (
        INSERT INTO crawlq_job (queue, kind, state, priority, run_at, max_attempts, parent_id, args,
                                attempt, lease_until, lease_token, worker, started_at)
        SELECT q, k, 'running', p, coalesce(p_now, now()), m, NULLIF(par, 0), a::jsonb,
               1, coalesce(p_now, now()) + p_lease_ms * interval '1 millisecond', p_lease_token, p_worker, coalesce(p_now, now())
        FROM src
        WHERE src.h IS NULL OR EXISTS (SELECT 1 FROM once WHERE once.parent_id = src.par AND once.h = src.h)
        ORDER BY o
        RETURNING *
    ), cnt AS (
        INSERT INTO crawlq_job_count_delta (queue, state, n)
        SELECT ins.queue, ins.state, count(*) FROM ins GROUP BY ins.queue, ins.state
    )
    SELECT * FROM ins;
END
$$;

-- crawl/finish.go: a batch of pages' contributions to their runs' stats, and which of the runs have
-- been asked to cancel (see AddRunStats).
CREATE FUNCTION crawlq_add_run_stats(p_run_ids bigint[], p_pages int[], p_items int[], p_bytes bigint[], p_errors int[],
                                     p_retries int[], p_kinds text[], p_counts int[])
RETURNS TABLE (run_id bigint, cancel_requested boolean) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    INSERT INTO crawlq_run_stat (run_id, pages, items, bytes, errors, retries, kind, n)
    SELECT x.r, x.p, x.i, x.b, x.e, x.t, NULLIF(x.k, ''), x.n
    FROM (SELECT unnest(p_run_ids) AS r, unnest(p_pages) AS p, unnest(p_items) AS i, unnest(p_bytes) AS b,
                 unnest(p_errors) AS e, unnest(p_retries) AS t, unnest(p_kinds) AS k, unnest(p_counts) AS n) x
    RETURNING crawlq_run_stat.run_id,
              (SELECT r.cancel_requested FROM crawlq_run r WHERE r.id = crawlq_run_stat.run_id);
END
$$;

-- items.Postgres: a batch of items; a key already written is skipped (see InsertItems).
CREATE FUNCTION crawlq_insert_items(p_run_ids bigint[], p_keys text[], p_spiders text[], p_urls text[], p_data text[])
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
BEGIN
    INSERT INTO crawlq_item (run_id, key, spider, url, data)
    SELECT u.run_id, u.key, u.spider, u.url, u.data::jsonb
    FROM (SELECT unnest(p_run_ids) AS run_id, unnest(p_keys) AS key, unnest(p_spiders) AS spider,
                 unnest(p_urls) AS url, unnest(p_data) AS data) u
    ON CONFLICT (run_id, key) DO NOTHING;
END
$$;
