-- 0018_running_counted_from_rows: running jobs are counted from their rows (the partial index
-- crawlq_job_lease holds exactly them), no longer recorded in crawlq_job_count_delta. A job that
-- is claimed, or inserted already running (a page a page found), and then completed wrote three
-- delta rows in those statements (+running; -running and +succeeded); now one (+succeeded), so a
-- crawled page writes ~0.1 row fewer on the chain bench site (crawlq bench --op crawl). Running
-- jobs are few (what the live workers hold), so counting them is a short index scan.
--
-- ReadCounts ignores 'running' in the count tables, so deltas a process of the previous release
-- still writes while a deploy rolls out change nothing; its statements (fail, snooze, rescue) go
-- on writing them, and the folds keep the tables small as before.

DELETE FROM crawlq_job_count WHERE state = 'running';
DELETE FROM crawlq_job_count_delta WHERE state = 'running';

-- The claim (0010): only the available jobs it took leave a delta.
CREATE OR REPLACE FUNCTION crawlq_claim_jobs(p_queue text, p_max_jobs int, p_now timestamptz, p_lease_ms bigint,
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
        SELECT c.queue, 'available'::crawlq_job_state, -count(*) FROM claimed c GROUP BY c.queue
    )
    SELECT * FROM claimed;
END
$$;

-- The completion (0010): only the succeeded jobs leave a delta.
CREATE OR REPLACE FUNCTION crawlq_complete_jobs(p_ids bigint[], p_tokens bigint[], p_now timestamptz)
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
    )
    SELECT d.id, h.token FROM done d JOIN held h ON h.id = d.id;
END
$$;

-- The held insert (0015): jobs inserted running leave no delta.
CREATE OR REPLACE FUNCTION crawlq_insert_held_job_ids(p_queues text[], p_kinds text[], p_priorities smallint[], p_max_attempts int[],
                                                      p_parent_ids bigint[], p_args text[], p_hashes uuid[],
                                                      p_lease_ms bigint, p_lease_token bigint, p_worker text, p_now timestamptz)
RETURNS TABLE (id bigint, pos int, started_at timestamptz) LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_at timestamptz := coalesce(p_now, now());
BEGIN
    RETURN QUERY
    WITH src AS (
        SELECT unnest(p_queues) AS q, unnest(p_kinds) AS k, unnest(p_priorities) AS p, unnest(p_max_attempts) AS m,
               unnest(p_parent_ids) AS par, unnest(p_args) AS a, unnest(p_hashes) AS h,
               generate_series(1, cardinality(p_queues)) AS o
    ), pick AS (
        SELECT src.*, nextval('crawlq_job_id_seq'::regclass) AS nid FROM src
        WHERE src.h IS NULL OR NOT EXISTS (SELECT 1 FROM crawlq_job_once x WHERE x.parent_id = src.par AND x.h = src.h)
    ), ins AS (
        INSERT INTO crawlq_job (id, queue, kind, state, priority, run_at, max_attempts, parent_id, args, once_h,
                                attempt, lease_until, lease_token, worker, started_at, created_at)
        SELECT nid, q, k, 'running', p, v_at, m, NULLIF(par, 0), a::jsonb, h,
               1, v_at + p_lease_ms * interval '1 millisecond', p_lease_token, p_worker, v_at, v_at
        FROM pick ORDER BY o
        ON CONFLICT ((coalesce(parent_id, 0)), once_h) WHERE once_h IS NOT NULL DO NOTHING
        RETURNING crawlq_job.id
    )
    SELECT ins.id, pick.o::int, v_at FROM ins JOIN pick ON pick.nid = ins.id;
END
$$;
