-- 0005: runs that tell the truth (issue 13).
--
-- A run whose pages died ends 'incomplete' (what it got is kept; `crawlq redrive --run` finishes it),
-- not 'succeeded'. ADD VALUE may run in a transaction; the value is only used by later statements.
ALTER TYPE crawlq_run_state ADD VALUE IF NOT EXISTS 'incomplete' AFTER 'succeeded';

-- Written once when the run finishes (and again when a redriven run finishes again):
--   dead_pages    page jobs of the run that ended dead (retries exhausted);
--   failed_pages  a sample of them: [{"url":..., "error":..., "attempts":...}], at most 10;
--   max_dead_share the spider's limit, fixed at schedule time: more dead pages than this share of
--                  the pages tried makes the run 'failed' rather than 'incomplete'.
ALTER TABLE crawlq_run
    ADD COLUMN dead_pages     bigint NOT NULL DEFAULT 0,
    ADD COLUMN failed_pages   jsonb NOT NULL DEFAULT '[]',
    ADD COLUMN max_dead_share real NOT NULL DEFAULT 0.5;

-- A run's dead jobs: counted and sampled when it finishes, redriven by `crawlq redrive --run`.
-- Dead jobs are few, so the index is small, and crawlq_job_parent (unfinished jobs only) stays so.
CREATE INDEX crawlq_job_parent_dead ON crawlq_job (parent_id) WHERE state = 'dead' AND parent_id IS NOT NULL;

-- A host that fails at the connection level (refused, reset, timeouts, a streak of 5xx/429) is
-- paused for every worker, instead of each of its queued pages burning its attempts:
--   paused_until  no page of the host is fetched before this (they wait without counting an attempt);
--   fail_streak   failed probes in a row: the pause doubles with each, up to the spider's cap;
--   down_since    first failure of the streak: past the spider's host_down_limit, pages count
--                 attempts again, so a host that never comes back ends its runs 'incomplete'.
ALTER TABLE crawlq_domain
    ADD COLUMN paused_until timestamptz,
    ADD COLUMN fail_streak  integer NOT NULL DEFAULT 0,
    ADD COLUMN down_since   timestamptz;
