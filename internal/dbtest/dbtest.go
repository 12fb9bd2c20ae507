// Package dbtest gives each test its own migrated PostgreSQL schema on the server at
// DATABASE_URL, so tests run in parallel against a real database without seeing each
// other's rows; schemas are migrated once and reused, emptied, by later tests of the process. A missing DATABASE_URL fails the test loudly: `make test` sets it.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/db"
)

// URL returns DATABASE_URL or fails the test.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("DATABASE_URL")
	if u == "" {
		t.Fatal("DATABASE_URL is not set: run tests with `make test`, which starts a throwaway Postgres (scripts/localpg.sh)")
	}
	return u
}

// Schema returns the name of a migrated schema with no rows (its tables as a fresh migration
// leaves them) that this test has to itself, and a URL whose connections use it (search_path).
// When the test ends the schema is emptied and kept for a later test of this process (see
// reuse.go), so close what uses it first: pools from Open are closed before, being opened after.
func Schema(t testing.TB) (name, url string) {
	t.Helper()
	base := URL(t)
	name = schemas.take(t, base)
	t.Cleanup(func() {
		if err := schemas.give(base, name); err != nil {
			t.Error(err)
		}
	})
	return name, withSearchPath(base, name)
}

// EmptySchema is a new schema without the migrations, dropped when the test ends: for tests of
// the migrations themselves.
func EmptySchema(t testing.TB) (name, url string) {
	t.Helper()
	base := URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := db.Open(ctx, db.Config{URL: base, MaxConns: 2})
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	defer admin.Close()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name = "t_" + hex.EncodeToString(b)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		t.Fatalf("dbtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		a, err := db.Open(ctx, db.Config{URL: base, MaxConns: 1})
		if err != nil {
			t.Errorf("dbtest: drop schema: %v", err)
			return
		}
		defer a.Close()
		if _, err := a.Exec(ctx, "DROP SCHEMA "+ident+" CASCADE"); err != nil {
			t.Errorf("dbtest: drop schema %s: %v", name, err)
		}
	})
	return name, withSearchPath(base, name)
}

// Pool returns a pool on a fresh migrated schema (see Schema), closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	_, url := Schema(t)
	return Open(t, url, 16)
}

// Open opens a pool on url, closed when the test ends.
func Open(t testing.TB, url string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := db.Open(ctx, db.Config{URL: url, MaxConns: maxConns})
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func withSearchPath(url, schema string) string {
	sep := "?"
	for _, c := range url {
		if c == '?' {
			sep = "&"
			break
		}
	}
	return url + sep + "search_path=" + schema
}
