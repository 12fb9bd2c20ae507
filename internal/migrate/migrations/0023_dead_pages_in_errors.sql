-- 0023_dead_pages_in_errors: a run's errors count its dead pages as long as they are dead
-- (internal/crawl; internal/dbsqlc/crawlq_run.sql FinishRun, crawlq_run_stat.sql RetryRedriven),
-- where a page's stat rows counted an error when it died and a redrive that made it succeed left
-- that error counted. A page's death now adds no error to its stat rows; the run adds its dead
-- pages when it finishes, and a redrive takes the ones it queues again out of its errors.
--
-- A run live now has stat rows that counted its pages dead so far as errors, and would count them
-- again when it finishes: one stat row takes them out. A finished run's folded errors are already
-- what they mean.
INSERT INTO crawlq_run_stat (run_id, errors, kind, n)
SELECT j.parent_id, -count(*)::int, NULL, 1
FROM crawlq_job j JOIN crawlq_run r ON r.id = j.parent_id
WHERE r.state IN ('pending', 'running') AND j.state = 'dead' AND j.kind = 'page'
GROUP BY j.parent_id;
