-- 0015_job_once_key: a job's once key is kept on the job itself (once_h, the MD5 of the key, with a
-- unique index per parent) instead of in a row of crawlq_job_once beside it. A crawl gives every
-- page job its URL as once key, so this is one row fewer written per crawled page (measured with
-- `crawlq bench --op crawl`: 5.13 to 4.24 rows per page on the wide bench site, 4.21 to 3.30 on the
-- chain site) and one heap tuple fewer per page to vacuum and purge.
--
-- A key must outlive its job's retention while its parent can still enqueue (OnceKey's contract:
-- "ever"). So a job with a once key is kept by retention (crawlq_job_finished no longer lists it,
-- dead jobs apart: see below) and leaves with its parent's keys, when the parent is settled (queue.Client.DeleteOnceKeys,
-- called by internal/maintain's run purge): as long as its key's row used to be kept.
--
-- Existing databases: crawlq_job_once keeps the keys written before this migration (live runs'
-- among them) and every insert still refuses a key found there; nothing adds to it any more, and
-- the run purge deletes its rows as before. A process of the previous release still running
-- while a deploy rolls out inserts its keys there: the trigger below drops such a key when a job
-- already carries it (so that job is not enqueued twice), and this release reads the table.
--
-- The parent is coalesced to 0 in the index because a job without one (parent_id NULL) has its
-- once keys in the scope of parent 0, as crawlq_job_once had them.

ALTER TABLE crawlq_job ADD COLUMN once_h uuid;

CREATE UNIQUE INDEX crawlq_job_once_key ON crawlq_job ((coalesce(parent_id, 0)), once_h) WHERE once_h IS NOT NULL;

-- Retention passes over jobs with once keys (see above), without stepping over them; but not
-- over dead ones, which would keep their parent from ever settling: a dead job with a once key
-- goes with the dead window once its parent has no unfinished job (DeleteFinishedJobsByAge).
DROP INDEX crawlq_job_finished;
CREATE INDEX crawlq_job_finished ON crawlq_job (queue, finished_at)
    WHERE state IN ('succeeded', 'cancelled', 'dead') AND (once_h IS NULL OR state = 'dead');

-- A key a previous release's process inserts that a job already carries is dropped (see above).
CREATE FUNCTION crawlq_job_once_taken() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM crawlq_job WHERE coalesce(parent_id, 0) = NEW.parent_id AND once_h = NEW.h) THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER crawlq_job_once_taken BEFORE INSERT ON crawlq_job_once FOR EACH ROW EXECUTE FUNCTION crawlq_job_once_taken();

-- queue.Reservation's insert (0011), its key now on the job: same arguments and answer, so a
-- process of the previous release calling it gets the new behaviour. A job whose key is taken (on
-- a job, or in crawlq_job_once) is skipped: ON CONFLICT on crawlq_job_once_key decides between
-- concurrent inserts of one key. Each job's id is drawn before the insert, so the answer pairs ids
-- with positions however many were skipped.
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
        RETURNING crawlq_job.id, crawlq_job.queue
    ), cnt AS (
        INSERT INTO crawlq_job_count_delta (queue, state, n)
        SELECT ins.queue, 'running'::crawlq_job_state, count(*) FROM ins GROUP BY ins.queue
    )
    SELECT ins.id, pick.o::int, v_at FROM ins JOIN pick ON pick.nid = ins.id;
END
$$;
