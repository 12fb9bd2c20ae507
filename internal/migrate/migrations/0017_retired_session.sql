-- 0017_retired_session: the sessions of a run that were retired (banned, or their proxy benched;
-- internal/crawl's sessions.go, queries in internal/dbsqlc/crawlq_session.sql), so every worker
-- process moves the session's pages to a new session, not only the one that saw the ban. A row is
-- written once per retirement; maintenance deletes a finished run's rows with its other leftovers.
CREATE TABLE crawlq_session (
    run_id     bigint NOT NULL,
    session    bigint NOT NULL,
    retired_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, session)
);
