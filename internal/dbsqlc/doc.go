// Package dbsqlc holds every SQL statement crawlq runs, one .sql file per table
// (crawlq_job.sql has every query on crawlq_job, and so on), compiled by sqlc into typed Go
// beside them: a Params struct per statement with named fields, a Row struct per result shape.
// The schema sqlc checks them against is the migrations (internal/migrate/migrations), so a
// query naming a column no migration creates does not compile, and a column added to a
// RETURNING list adds a field instead of shifting a positional scan. The one table no migration
// makes, crawlq_migration (the record of the migrations), is made by the CREATE TABLE in
// crawlq_migrate.sql, which sqlc.yaml also lists as schema.
//
// Edit the .sql files, then run `make generate`; `make verify` fails when the generated Go is
// stale. Each statement's comment says which index it uses and why. A JSON parameter is passed
// as text and cast in SQL (sqlc.arg(x)::text::jsonb): in the pools' default exec mode pgx types
// a parameter by its Go type, and a []byte goes as bytea, which is not JSON. Hand-written files here
// (named without .sql.go) only add what sqlc cannot express, such as composing several
// statements into one pgx.Batch.
//
// The exception to "every statement is here": the statements every job and every crawled page
// runs (ClaimJobs, CompleteJobs, CompleteJobsOrAbort, InsertHeldJobs, AddRunStats, InsertItems)
// are PL/pgSQL functions made by migration 0010 (the held insert's current one by 0011), and their
// queries here call them. In exec mode nothing is prepared, so a statement sent as text is parsed
// and planned on every call (~30% of the database's CPU on the chain bench site), and even
// prepared these were planned again on every call; a function's plans are made once per session.
// Change those statements with a new migration (CREATE OR REPLACE FUNCTION, or a new function
// when the result type changes).
package dbsqlc
