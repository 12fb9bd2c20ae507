-- 0022_schedule_firer: when a process last looked for due schedules to fire (owned by
-- internal/cronstore, like crawlq_schedule). Only `crawlq local` fires the schedules kept in
-- Postgres; `crawlq schedules add|list` read this row to say so when none has looked lately,
-- rather than leave a schedule that never fires unexplained. One row: who looked is not the point.
CREATE TABLE crawlq_schedule_firer (
    id      boolean PRIMARY KEY DEFAULT true CHECK (id),
    seen_at timestamptz NOT NULL
);
