-- 0014_schedules: recurring runs kept in Postgres, for `crawlq local` (internal/cronstore owns the
-- table; on AWS EventBridge Scheduler keeps them). A row is one schedule as addschedule made it:
-- its EventBridge expression and timezone, and the api payload it fires. next_at is the tick it
-- fires next: the firing process holds the row (FOR UPDATE SKIP LOCKED) while it fires, and
-- advances next_at in that same transaction, so a tick fires once however many processes look.
CREATE TABLE crawlq_schedule (
    grp         text NOT NULL,
    name        text NOT NULL,
    expression  text NOT NULL,
    timezone    text NOT NULL,
    state       text NOT NULL DEFAULT 'ENABLED' CHECK (state IN ('ENABLED', 'DISABLED')),
    description text NOT NULL DEFAULT '',
    input       text NOT NULL,
    next_at     timestamptz NOT NULL,
    -- The last tick fired (or skipped), what firing it answered (the run's jobid), and why it
    -- failed when it did.
    last_tick_at timestamptz,
    last_run     text NOT NULL DEFAULT '',
    last_error   text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (grp, name)
);
-- The firing loop's scan: enabled schedules by their next tick.
CREATE INDEX crawlq_schedule_due ON crawlq_schedule (next_at) WHERE state = 'ENABLED';
