-- Every query on crawlq_migration, the record of which migrations a schema has (internal/migrate).
-- The table is not made by a migration (it is what records them), so this file is also in
-- sqlc.yaml's schema list: CreateMigrationTable's CREATE TABLE is the one definition sqlc
-- checks the other statements against and the one migrate runs. Each migration runs in a
-- transaction that first takes LockMigrations, so two processes migrating one database at once
-- apply each migration once; the lock is transaction-scoped, released at commit or rollback, so
-- it never outlives a pooled connection's session.

-- name: CreateMigrationTable :exec
-- Makes the table when it is missing. Run under LockMigrations: two processes' CREATE TABLE IF
-- NOT EXISTS still race on the catalog.
CREATE TABLE IF NOT EXISTS crawlq_migration (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: LockMigrations :exec
-- Waits for and takes the advisory lock that serialises migrations until the transaction ends.
-- The key is the bytes of "crawlq" (0x637261776c71).
SELECT pg_advisory_xact_lock(109342912638065);

-- name: AppliedMigrations :many
-- Every applied version, in order (a scan of the primary key; the table has a row per migration).
SELECT version FROM crawlq_migration ORDER BY version;

-- name: MigrationApplied :one
-- Whether a version has been applied: taken under LockMigrations, so the answer holds until commit.
SELECT EXISTS (SELECT 1 FROM crawlq_migration WHERE version = @version) AS applied;

-- name: RecordMigration :exec
-- Records a migration as applied, in the transaction that applied it.
INSERT INTO crawlq_migration (version, name) VALUES (@version, @name);
