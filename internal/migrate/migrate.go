// Package migrate owns crawlq's database schema: numbered SQL migrations embedded in the
// binary, each applied once in its own transaction.
//
// Each table's DDL lives in the migration that creates it; every query lives in
// internal/dbsqlc, compiled by sqlc against these migrations, including the bookkeeping this
// package runs (crawlq_migrate.sql: the crawlq_migration table, the lock, the applied versions).
// A migration file itself is sent as text, since a file is many statements. Concurrent Up calls
// from several processes are safe: each migration's transaction first takes a
// transaction-scoped advisory lock, released at commit, so it never outlives a pooled
// connection's session.
package migrate

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/dbsqlc"
)

//go:embed migrations/*.sql
var files embed.FS

// ErrBadMigration reports a migration file whose name does not follow NNNN_name.sql, or two
// files with one version.
var ErrBadMigration = errors.New("bad migration file name")

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string // the file name without its version and .sql: recorded in crawlq_migration
	File    string // the file name, as errors name it
	SQL     string
}

// All returns every embedded migration in version order.
func All() ([]Migration, error) {
	sub, err := fs.Sub(files, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	return Load(sub)
}

// Load returns the migrations at the root of fsys (files named NNNN_name.sql; other names are
// an error) in version order. Versions are numbers, so 10_x comes after 9_y whatever the padding.
func Load(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("%w: %s (want NNNN_name.sql)", ErrBadMigration, name)
		}
		num, rest, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || v > math.MaxInt32 || rest == "" {
			return nil, fmt.Errorf("%w: %s (want NNNN_name.sql)", ErrBadMigration, name)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("%w: %s and %s share version %d", ErrBadMigration, prev, name, v)
		}
		seen[v] = name
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		ms = append(ms, Migration{Version: v, Name: rest, File: name, SQL: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// Status is a migration and whether it has been applied.
type Status struct {
	Migration
	Applied bool
}

// List reports every embedded migration and whether the database has it.
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

// Up applies every embedded migration not yet applied and returns the versions it applied. On
// an up-to-date schema it costs one query, so processes can call it at start.
func Up(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	ms, err := All()
	if err != nil {
		return nil, err
	}
	return upAll(ctx, pool, ms)
}

// UpFrom is Up with the migrations at the root of fsys (see Load) instead of the embedded ones.
func UpFrom(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) ([]int, error) {
	ms, err := Load(fsys)
	if err != nil {
		return nil, err
	}
	return upAll(ctx, pool, ms)
}

func upAll(ctx context.Context, pool *pgxpool.Pool, ms []Migration) ([]int, error) {
	// A schema without the table (a new one) fails this read; the full path below makes it.
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
	q := dbsqlc.New(tx)
	if err := q.LockMigrations(ctx); err != nil {
		return fmt.Errorf("lock migrations: %w", err)
	}
	if err := q.CreateMigrationTable(ctx); err != nil {
		return fmt.Errorf("create crawlq_migration: %w", err)
	}
	return tx.Commit(ctx)
}

func appliedVersions(ctx context.Context, pool *pgxpool.Pool) (map[int]bool, error) {
	vs, err := dbsqlc.New(pool).AppliedMigrations(ctx)
	if err != nil {
		return nil, fmt.Errorf("list applied migrations: %w", err)
	}
	m := make(map[int]bool, len(vs))
	for _, v := range vs {
		m[int(v)] = true
	}
	return m, nil
}

// apply runs one migration and records it in one transaction, under the lock, unless it is
// already recorded: a migration that fails leaves neither its changes nor its record.
func apply(ctx context.Context, pool *pgxpool.Pool, m Migration) (bool, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("begin migration %s: %w", m.File, err)
	}
	defer tx.Rollback(ctx)
	q := dbsqlc.New(tx)
	if err := q.LockMigrations(ctx); err != nil {
		return false, fmt.Errorf("lock migrations: %w", err)
	}
	exists, err := q.MigrationApplied(ctx, int32(m.Version))
	if err != nil {
		return false, fmt.Errorf("check migration %s: %w", m.File, err)
	}
	if exists {
		return false, nil
	}
	// The simple protocol lets one migration file hold many statements.
	if _, err := tx.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
		return false, fmt.Errorf("apply migration %s: %w", m.File, err)
	}
	if err := q.RecordMigration(ctx, dbsqlc.RecordMigrationParams{Version: int32(m.Version), Name: m.Name}); err != nil {
		return false, fmt.Errorf("record migration %s: %w", m.File, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("commit migration %s: %w", m.File, err)
	}
	return true, nil
}
