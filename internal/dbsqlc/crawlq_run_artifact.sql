-- name: LockRunArtifacts :exec
-- Serializes the keeping of one run's artifacts for the rest of the transaction, so their bound
-- holds across processes.
SELECT pg_advisory_xact_lock(hashtext('crawlq_run_artifact'), (sqlc.arg(run_id)::bigint % 2147483647)::integer);

-- name: CountRunArtifacts :one
SELECT count(*)::int FROM crawlq_run_artifact WHERE run_id = @run_id;

-- name: CountJobArtifacts :one
SELECT count(*)::int FROM crawlq_run_artifact WHERE run_id = @run_id AND job_id = @job_id;

-- name: InsertRunArtifact :execrows
-- Keeps a failed page's artifact; a second keep of the same name (a retried write) changes nothing.
INSERT INTO crawlq_run_artifact (run_id, name, job_id, attempt, url, error, at, png_bytes, html_bytes, truncated, png, html, location)
VALUES (@run_id, @name, @job_id, @attempt, @url, @error, @at, @png_bytes, @html_bytes, @truncated, @png, @html, @location)
ON CONFLICT (run_id, name) DO NOTHING;

-- name: ListRunArtifacts :many
-- A run's artifacts in the order they were kept, without their files.
SELECT name, job_id, attempt, url, error, at, png_bytes, html_bytes, truncated, location
FROM crawlq_run_artifact WHERE run_id = @run_id ORDER BY at, name;

-- name: GetRunArtifact :one
SELECT png, html, location FROM crawlq_run_artifact WHERE run_id = @run_id AND name = @name;
