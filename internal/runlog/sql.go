package runlog

// Every query on crawlq_run_log (created by migration 0006_spiders.sql) lives in this file.

// sqlAppend adds lines to a run's log, in order.
const sqlAppend = `
INSERT INTO crawlq_run_log (run_id, line) SELECT $1, l FROM unnest($2::text[]) WITH ORDINALITY AS x(l, n) ORDER BY n`

// sqlRead reads a run's lines after a cursor (an id). Index: crawlq_run_log_run.
const sqlRead = `
SELECT id, at, line FROM crawlq_run_log WHERE run_id = $1 AND id > $2 ORDER BY id LIMIT $3`
