-- 0009_run_events: the run-event outbox and the per-run report (owned by internal/events; every
-- query on these tables is in internal/dbsqlc, one .sql file per table).
--
-- Every state change of a run (its insert as 'pending', then each UPDATE that changes state) adds
-- one row to crawlq_run_event, written by a trigger in the transaction that changes the run. So a
-- change is recorded exactly once whoever makes it (the crawl package, a sweep, a cancel, a future
-- code path), and never without the change committing. The publisher (internal/events) drains
-- the outbox to Amazon EventBridge: at least once, in order per run, retried with backoff; it
-- never writes crawlq_run.

CREATE TABLE crawlq_run_event (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id          bigint NOT NULL,
    spider          text NOT NULL,
    -- text, not crawlq_run_state: a state added to the enum later needs no change here.
    state           text NOT NULL,
    prev_state      text,
    -- The run row as the change left it (to_jsonb(NEW) without settings): its stats, error and
    -- times at that moment, whatever columns other migrations add.
    run             jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- Publishing: NULL until EventBridge accepted it. next_attempt_at doubles as the claim: a
    -- publisher pushes it a lease ahead before calling out, so a concurrent publisher skips the
    -- row and a crashed one's rows come back when the lease ends.
    published_at    timestamptz,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text
);
-- The unpublished events, oldest first (the publisher's scan), and per run (the publisher takes
-- only each run's oldest, so a run's events go out in order). Published rows leave both, so they
-- stay as small as the backlog.
CREATE INDEX crawlq_run_event_unpublished ON crawlq_run_event (id) WHERE published_at IS NULL;
CREATE INDEX crawlq_run_event_pending ON crawlq_run_event (run_id, id) WHERE published_at IS NULL;
-- One run's events (crawlq run, tests) and retention of published events by age.
CREATE INDEX crawlq_run_event_run ON crawlq_run_event (run_id, id);
CREATE INDEX crawlq_run_event_published ON crawlq_run_event (published_at) WHERE published_at IS NOT NULL;

CREATE FUNCTION crawlq_run_event_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO crawlq_run_event (run_id, spider, state, prev_state, run)
    VALUES (NEW.id, NEW.spider, NEW.state::text,
            CASE WHEN TG_OP = 'UPDATE' THEN OLD.state::text END,
            to_jsonb(NEW) - 'settings');
    RETURN NULL;
END
$$;

-- An insert through the idempotent schedule's ON CONFLICT DO UPDATE path fires the update trigger,
-- not this one, and sets no state, so it records nothing: only a new run is 'scheduled'.
CREATE TRIGGER crawlq_run_event_insert AFTER INSERT ON crawlq_run
    FOR EACH ROW EXECUTE FUNCTION crawlq_run_event_record();
-- WHEN keeps updates that rewrite the same state (a run job restarting a running run) silent,
-- without calling the function.
CREATE TRIGGER crawlq_run_event_update AFTER UPDATE OF state ON crawlq_run
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION crawlq_run_event_record();

-- What a finished run is judged by, written once by the publisher when it first sees the run's
-- final event (before publishing it): the spider's monitors' verdict and results, its field
-- coverage, and the figures history compares. Separate from crawlq_run so that judging a run never
-- writes (or locks) the run's own row.
CREATE TABLE crawlq_run_report (
    run_id       bigint PRIMARY KEY,
    spider       text NOT NULL,
    state        text NOT NULL,
    -- 'passed', 'failed' (at least one monitor failed), 'none' (the spider declares none) or
    -- 'skipped' (the run failed or was cancelled: its state is the alarm already).
    monitors     text NOT NULL,
    results      jsonb NOT NULL DEFAULT '[]',
    -- Items stored in crawlq_item for the run, and per field how many have it present and
    -- non-empty. NULL when the items went elsewhere (the S3 sink): coverage is then unknown.
    items_stored bigint,
    coverage     jsonb,
    -- The run's figures at its end (pages, items, bytes, errors, retries, errors_by_kind,
    -- duration_seconds, and dead_pages when the run has it).
    stats        jsonb NOT NULL,
    evaluated_at timestamptz NOT NULL DEFAULT now()
);
-- History per spider, newest first (crawlq runs --spider, the drift monitor's median).
CREATE INDEX crawlq_run_report_spider ON crawlq_run_report (spider, run_id DESC);
