package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/db"
	"crawlq/internal/migrate"
)

// Migrated schemas are reused within a test process: a test's schema is emptied when it ends
// (every table but crawlq_migration truncated, identities restarted) and handed to the next
// test that asks, so each process runs the migrations once per schema it needs at the same
// time, not once per test. Emptying costs one TRUNCATE; migrating costs every migration's DDL
// (0.4–2.6 s on a loaded machine, against tens of milliseconds).
//
// A process names its schemas t_<owner>_<n> and holds, on one connection it never closes, a
// session advisory lock on its owner id. The lock goes with the process however it ends, so
// the first Schema call of any later process drops the schemas of owners whose lock it can
// take: nothing outlives the run that made it for longer than the next run's start.

// ownerLockSpace is the advisory-lock namespace of schema owners (pg_try_advisory_lock(int, int)'s
// first key), so these locks never collide with the application's own advisory locks.
const ownerLockSpace = 0x64627473 // "dbts"

var reusable = regexp.MustCompile(`^t_([0-9a-f]{12})_[0-9]+$`)

type schemaPool struct {
	mu     sync.Mutex
	owner  string    // this process's id in its schemas' names
	hold   *pgx.Conn // holds the owner lock for the life of the process
	next   int
	free   []string
	seeded []string // tables a fresh migration fills, other than crawlq_migration: see reusableAfter
	ready  bool
}

var schemas schemaPool

// take returns a migrated, empty schema: a reused one, or a new one migrated now.
func (p *schemaPool) take(t testing.TB, base string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p.mu.Lock()
	if err := p.start(ctx, base); err != nil {
		p.mu.Unlock()
		t.Fatalf("dbtest: %v", err)
	}
	if n := len(p.free); n > 0 {
		name := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return name
	}
	p.next++
	name := fmt.Sprintf("t_%s_%d", p.owner, p.next)
	p.mu.Unlock()

	admin, err := db.Open(ctx, db.Config{URL: base, MaxConns: 1})
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("dbtest: create schema: %v", err)
	}
	pool, err := db.Open(ctx, db.Config{URL: withSearchPath(base, name), MaxConns: 2})
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	defer pool.Close()
	if _, err := migrate.Up(ctx, pool); err != nil {
		t.Fatalf("dbtest: migrate: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ready {
		// What the migrations themselves put in tables is a property of the migrations, so one
		// schema tells it for all.
		if p.seeded, err = filledTables(ctx, pool); err != nil {
			t.Fatalf("dbtest: %v", err)
		}
		p.ready = true
	}
	return name
}

// give empties name and keeps it for the next test; a schema it cannot empty, or one whose
// migrations put rows of their own in a table (truncating would lose them), is dropped.
func (p *schemaPool) give(base, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return fmt.Errorf("dbtest: empty schema %s: %w", name, err)
	}
	defer conn.Close(ctx)
	p.mu.Lock()
	seeded := len(p.seeded) > 0
	p.mu.Unlock()
	if !seeded {
		if err := empty(ctx, conn, name); err == nil {
			p.mu.Lock()
			p.free = append(p.free, name)
			p.mu.Unlock()
			return nil
		}
	}
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("dbtest: drop schema %s: %w", name, err)
	}
	return nil
}

// start takes this process's owner lock and drops the schemas of owners that are gone. p.mu held.
func (p *schemaPool) start(ctx context.Context, base string) error {
	if p.hold != nil {
		return nil
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	owner := hex.EncodeToString(b)
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1, hashtext($2))", ownerLockSpace, owner); err != nil {
		conn.Close(ctx)
		return fmt.Errorf("owner lock: %w", err)
	}
	if err := sweep(ctx, conn); err != nil {
		conn.Close(ctx)
		return err
	}
	p.owner, p.hold = owner, conn
	return nil
}

// sweep drops the reusable schemas whose owner's lock is free: that process has ended.
func sweep(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, "SELECT nspname FROM pg_namespace WHERE nspname LIKE 't\\_%\\_%'")
	if err != nil {
		return fmt.Errorf("list schemas: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list schemas: %w", err)
	}
	byOwner := map[string][]string{}
	for _, n := range names {
		if m := reusable.FindStringSubmatch(n); m != nil {
			byOwner[m[1]] = append(byOwner[m[1]], n)
		}
	}
	for owner, names := range byOwner {
		var gone bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, hashtext($2))", ownerLockSpace, owner).Scan(&gone); err != nil {
			return fmt.Errorf("owner lock %s: %w", owner, err)
		}
		if !gone {
			continue
		}
		for _, n := range names {
			if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{n}.Sanitize()+" CASCADE"); err != nil {
				return fmt.Errorf("drop a gone process's schema %s: %w", n, err)
			}
		}
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1, hashtext($2))", ownerLockSpace, owner); err != nil {
			return fmt.Errorf("owner lock %s: %w", owner, err)
		}
	}
	return nil
}

// empty truncates every table of schema but crawlq_migration and restarts their identities: the
// state a fresh migration leaves when no migration fills a table (see filledTables). It waits
// at most 10 s for a lock, so a test that left a transaction open gets its schema dropped
// instead of stalling the next.
func empty(ctx context.Context, conn *pgx.Conn, schema string) error {
	rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = $1 AND tablename <> 'crawlq_migration'`, schema)
	if err != nil {
		return err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) == 0 {
		return err
	}
	for i, tb := range tables {
		tables[i] = pgx.Identifier{schema, tb}.Sanitize()
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '10s'"); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "TRUNCATE "+strings.Join(tables, ", ")+" RESTART IDENTITY CASCADE"); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// filledTables names the tables of a freshly migrated schema that hold rows, crawlq_migration
// aside.
func filledTables(ctx context.Context, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) ([]string, error) {
	rows, err := pool.Query(ctx, `SELECT tablename FROM pg_tables
		WHERE schemaname = current_schema() AND tablename <> 'crawlq_migration'
		  AND (xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n FROM %I.%I', schemaname, tablename), false, true, '')))[1]::text::int > 0`)
	if err != nil {
		return nil, fmt.Errorf("tables a migration fills: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
