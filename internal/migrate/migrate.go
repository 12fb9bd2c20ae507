// Package migrate owns crawlq's database schema: numbered SQL migrations embedded in the
// binary, each applied once in its own transaction.
//
// Each table's DDL lives in the migration that creates it; the queries that use a table
// live in the package that owns it (queue, crawl, items). Concurrent Migrate calls from
// several processes are safe: each migration takes a transaction-scoped advisory lock,
// which is released at commit and so never outlives a pooled connection's session.
package migrate

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var files embed.FS

// lockKey is the advisory lock that serialises migrations (the bytes of "crawlq").
const lockKey = 0x637261776c71

// ErrBadMigration reports a migration file whose name does not follow NNNN_name.sql.
var ErrBadMigration = errors.New("bad migration file name")

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// All returns every embedded migration in version order.
func All() ([]Migration, error) {
	entries, err := fs.ReadDir(files, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		num, rest, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("%w: %s", ErrBadMigration, name)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("%w: %s and %s share version %d", ErrBadMigration, prev, name, v)
		}
		seen[v] = name
		body, err := files.ReadFile("migrations/" + name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		ms = append(ms, Migration{Version: v, Name: rest, SQL: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// Status is a migration and whether it has been applied.
type Status struct {
	Migration
	Applied bool
}

// List reports every migration and whether the database has it.
func List(ctx context.Context, pool *pgxpool.Pool) ([]Status, error) {
	ms, err := All()
	if err != nil {
		return nil, err
	}
	if err := ensureTable(ctx, pool); err != nil {
		return nil, err
	}
	applied, err := appliedVersions(ctx, pool)
	if err != nil {
		return nil, err
	}
	out := make([]Status, len(ms))
	for i, m := range ms {
		out[i] = Status{Migration: m, Applied: applied[m.Version]}
	}
	return out, nil
}

// Up applies every migration not yet applied and returns the versions it applied. On an
// up-to-date schema it costs one query, so processes can call it at start.
func Up(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	ms, err := All()
	if err != nil {
		return nil, err
	}
	if applied, err := appliedVersions(ctx, pool); err == nil && len(applied) >= len(ms) {
		pending := false
		for _, m := range ms {
			pending = pending || !applied[m.Version]
		}
		if !pending {
			return nil, nil
		}
	}
	if err := ensureTable(ctx, pool); err != nil {
		return nil, err
	}
	var done []int
	for _, m := range ms {
		applied, err := apply(ctx, pool, m)
		if err != nil {
			return done, err
		}
		if applied {
			done = append(done, m.Version)
		}
	}
	return done, nil
}

func ensureTable(ctx context.Context, pool *pgxpool.Pool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx)
	// CREATE TABLE IF NOT EXISTS still races on the catalog between two processes; the lock avoids it.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(lockKey)); err != nil {
		return fmt.Errorf("lock migrations: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS crawlq_migration (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("create crawlq_migration: %w", err)
	}
	return tx.Commit(ctx)
}

func appliedVersions(ctx context.Context, pool *pgxpool.Pool) (map[int]bool, error) {
	rows, err := pool.Query(ctx, `SELECT version FROM crawlq_migration`)
	if err != nil {
		return nil, fmt.Errorf("list applied migrations: %w", err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("list applied migrations: %w", err)
	}
	m := map[int]bool{}
	for _, v := range vs {
		m[v] = true
	}
	return m, nil
}

func apply(ctx context.Context, pool *pgxpool.Pool, m Migration) (bool, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("begin migration %d: %w", m.Version, err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(lockKey)); err != nil {
		return false, fmt.Errorf("lock migrations: %w", err)
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM crawlq_migration WHERE version = $1)`, m.Version).Scan(&exists); err != nil {
		return false, fmt.Errorf("check migration %d: %w", m.Version, err)
	}
	if exists {
		return false, nil
	}
	// The simple protocol lets one migration file hold many statements.
	if _, err := tx.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
		return false, fmt.Errorf("apply migration %d_%s: %w", m.Version, m.Name, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO crawlq_migration (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
		return false, fmt.Errorf("record migration %d: %w", m.Version, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("commit migration %d: %w", m.Version, err)
	}
	return true, nil
}
