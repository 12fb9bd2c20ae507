-- 0013_cancel_signal: what a cancel of a stored spider's run asked for, for the runner running
-- its command (internal/command). Scrapyd's cancel.json takes a signal (INT by default) and sends
-- it to the Scrapy process again at every cancel: Scrapy shuts down gracefully at the first and
-- forces its shutdown at the second. The job's cancel_requested flag says only that a cancel came,
-- once; these columns carry the signal asked for and count the cancels, so the runner, which
-- reads them while the command shuts down, can send the signal again.
--
-- Constant defaults: adding the columns rewrites nothing.
ALTER TABLE crawlq_spider_run
    ADD COLUMN cancel_signal text NOT NULL DEFAULT '', -- '' : the runner's default (SIGINT to Scrapy)
    ADD COLUMN cancels integer NOT NULL DEFAULT 0;
