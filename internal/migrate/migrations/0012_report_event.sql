-- 0012_report_event: a run's report names the final event it judged, so a run that finishes again
-- (a redrive reopens it, and its pages finishing end it a second time) is judged again when its
-- new final event is published: the report, the monitor metrics and that event carry the new
-- verdict instead of the first finish's. 0 for a report stored before this column: the
-- migration fills in the newest final event of its run recorded by then, where one is kept.
ALTER TABLE crawlq_run_report ADD COLUMN event_id bigint NOT NULL DEFAULT 0;

UPDATE crawlq_run_report r SET event_id = e.id
FROM (SELECT DISTINCT ON (ev.run_id) ev.run_id, ev.id, ev.created_at FROM crawlq_run_event ev
      WHERE ev.state IN ('succeeded', 'incomplete', 'failed', 'cancelled')
      ORDER BY ev.run_id, ev.id DESC) e
WHERE e.run_id = r.run_id AND e.created_at <= r.evaluated_at;
