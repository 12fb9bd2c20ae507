package migrate_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/dbtest"
	"crawlq/internal/migrate"
)

func files(m map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for name, sql := range m {
		fsys[name] = &fstest.MapFile{Data: []byte(sql)}
	}
	return fsys
}

func recorded(t *testing.T, pool *pgxpool.Pool) []int {
	t.Helper()
	rows, _ := pool.Query(context.Background(), `SELECT version FROM crawlq_migration ORDER BY version`)
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatalf("read crawlq_migration: %v", err)
	}
	return vs
}

func ints(t *testing.T, pool *pgxpool.Pool, sql string) []int {
	t.Helper()
	rows, _ := pool.Query(context.Background(), sql)
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return vs
}

// Versions are numbers: 10_c runs after 2_b, which file-name order would reverse (and 10_c
// needs the table 1_a makes).
func TestUpAppliesInVersionOrder(t *testing.T) {
	t.Parallel()
	_, url := dbtest.EmptySchema(t)
	pool := dbtest.Open(t, url, 2)
	fsys := files(map[string]string{
		"10_c.sql": `ALTER TABLE log ADD COLUMN note text; INSERT INTO log (v, note) VALUES (10, 'c');`,
		"2_b.sql":  `INSERT INTO log (v) VALUES (2);`,
		"1_a.sql":  `CREATE TABLE log (id serial PRIMARY KEY, v integer NOT NULL); INSERT INTO log (v) VALUES (1);`,
	})
	ms, err := migrate.Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.File)
	}
	if want := []string{"1_a.sql", "2_b.sql", "10_c.sql"}; !slices.Equal(got, want) {
		t.Fatalf("Load order %v, want %v", got, want)
	}
	done, err := migrate.UpFrom(context.Background(), pool, fsys)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	if want := []int{1, 2, 10}; !slices.Equal(done, want) {
		t.Errorf("Up applied %v, want %v", done, want)
	}
	if got, want := ints(t, pool, `SELECT v FROM log ORDER BY id`), []int{1, 2, 10}; !slices.Equal(got, want) {
		t.Errorf("migrations ran in the order %v, want %v", got, want)
	}
	if got, want := recorded(t, pool), []int{1, 2, 10}; !slices.Equal(got, want) {
		t.Errorf("crawlq_migration has %v, want %v", got, want)
	}
}

// The embedded set loads, in strictly increasing versions, and applies to an empty schema,
// after which List calls every migration applied.
func TestEmbeddedMigrationsApply(t *testing.T) {
	t.Parallel()
	ms, err := migrate.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatal("no embedded migrations")
	}
	var want []int
	for i, m := range ms {
		if i > 0 && m.Version <= ms[i-1].Version {
			t.Errorf("%s after %s: versions not increasing", m.File, ms[i-1].File)
		}
		want = append(want, m.Version)
	}
	_, url := dbtest.EmptySchema(t)
	pool := dbtest.Open(t, url, 2)
	ctx := context.Background()
	done, err := migrate.Up(ctx, pool)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	if !slices.Equal(done, want) {
		t.Errorf("Up applied %v, want %v", done, want)
	}
	st, err := migrate.List(ctx, pool)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, s := range st {
		if !s.Applied {
			t.Errorf("List: %s not applied", s.File)
		}
	}
}

func TestLoadRefusesBadNames(t *testing.T) {
	t.Parallel()
	dup := files(map[string]string{
		"0001_first.sql":  `SELECT 1;`,
		"0002_queue.sql":  `SELECT 1;`,
		"0002_crawls.sql": `SELECT 1;`,
	})
	_, err := migrate.Load(dup)
	if !errors.Is(err, migrate.ErrBadMigration) {
		t.Fatalf("Load of a duplicate version: %v, want ErrBadMigration", err)
	}
	for _, name := range []string{"0002_queue.sql", "0002_crawls.sql"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("duplicate version error %q does not name %s", err, name)
		}
	}
	for _, bad := range []string{"x_name.sql", "0001.sql", "0001_.sql", "0000_zero.sql", "0001_notes.txt", "-1_neg.sql"} {
		_, err := migrate.Load(files(map[string]string{bad: `SELECT 1;`}))
		if !errors.Is(err, migrate.ErrBadMigration) || !strings.Contains(err.Error(), bad) {
			t.Errorf("Load of %s: %v, want ErrBadMigration naming the file", bad, err)
		}
	}

	// Up with such a set changes nothing, not even the bookkeeping table.
	_, url := dbtest.EmptySchema(t)
	pool := dbtest.Open(t, url, 2)
	if _, err := migrate.UpFrom(context.Background(), pool, dup); !errors.Is(err, migrate.ErrBadMigration) {
		t.Fatalf("Up of a duplicate version: %v, want ErrBadMigration", err)
	}
	var table *string
	if err := pool.QueryRow(context.Background(), `SELECT to_regclass('crawlq_migration')::text`).Scan(&table); err != nil {
		t.Fatal(err)
	}
	if table != nil {
		t.Errorf("Up of a refused set made %s", *table)
	}
}

// A second Up applies nothing; one with a new file applies only it.
func TestUpTwiceIsANoOp(t *testing.T) {
	t.Parallel()
	_, url := dbtest.EmptySchema(t)
	pool := dbtest.Open(t, url, 2)
	ctx := context.Background()
	fsys := files(map[string]string{
		"0001_t.sql": `CREATE TABLE t (v integer NOT NULL); INSERT INTO t VALUES (1);`,
		"0002_u.sql": `INSERT INTO t VALUES (2);`,
	})
	if done, err := migrate.UpFrom(ctx, pool, fsys); err != nil || !slices.Equal(done, []int{1, 2}) {
		t.Fatalf("first Up: %v, %v; want [1 2]", done, err)
	}
	if done, err := migrate.UpFrom(ctx, pool, fsys); err != nil || len(done) != 0 {
		t.Fatalf("second Up: %v, %v; want nothing applied", done, err)
	}
	fsys["0003_v.sql"] = &fstest.MapFile{Data: []byte(`INSERT INTO t VALUES (3);`)}
	if done, err := migrate.UpFrom(ctx, pool, fsys); err != nil || !slices.Equal(done, []int{3}) {
		t.Fatalf("Up with a new migration: %v, %v; want [3]", done, err)
	}
	if got, want := ints(t, pool, `SELECT v FROM t ORDER BY v`), []int{1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("t has %v, want %v (each migration once)", got, want)
	}
	if got, want := recorded(t, pool), []int{1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("crawlq_migration has %v, want %v", got, want)
	}
}

// Two processes migrating at once (two pools, so two sessions) apply each migration once, and
// neither fails. The test holds a lock the first migration needs until both Up calls are
// waiting on a lock, so both are inside the first migration's step at once: without the
// advisory lock both would run it and one would fail recording it.
func TestConcurrentUpAppliesEachOnce(t *testing.T) {
	t.Parallel()
	schema, url := dbtest.EmptySchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := dbtest.Open(t, url, 2)
	if _, err := admin.Exec(ctx, `CREATE TABLE gate (x integer); CREATE TABLE log (v integer NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	fsys := files(map[string]string{
		"0001_gated.sql": `INSERT INTO log VALUES (1); SELECT count(*) FROM gate;`,
		"0002_after.sql": `INSERT INTO log VALUES (2);`,
	})
	gate, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Rollback(ctx)
	if _, err := gate.Exec(ctx, `LOCK TABLE gate IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

	app := "migrate_test_" + schema
	type result struct {
		done []int
		err  error
	}
	results := make(chan result, 2)
	for range 2 {
		pool := dbtest.Open(t, url+"&application_name="+app, 2)
		go func() {
			done, err := migrate.UpFrom(ctx, pool, fsys)
			results <- result{done, err}
		}()
	}
	// Both sessions blocked: one on the gate inside 0001, the other on the migration lock.
	for {
		var waiting int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&waiting); err != nil {
			t.Fatalf("waiting for both Up calls to block: %v", err)
		}
		if waiting == 2 {
			break
		}
		select {
		case r := <-results:
			t.Fatalf("an Up ended while the gate was held: %v, %v", r.done, r.err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := gate.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	var all []int
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Errorf("concurrent Up: %v", r.err)
		}
		all = append(all, r.done...)
	}
	slices.Sort(all)
	if want := []int{1, 2}; !slices.Equal(all, want) {
		t.Errorf("the two Up calls applied %v between them, want %v", all, want)
	}
	if got, want := ints(t, admin, `SELECT v FROM log ORDER BY v`), []int{1, 2}; !slices.Equal(got, want) {
		t.Errorf("log has %v, want %v (each migration once)", got, want)
	}
	if got, want := recorded(t, admin), []int{1, 2}; !slices.Equal(got, want) {
		t.Errorf("crawlq_migration has %v, want %v", got, want)
	}
}

// A migration that fails after a good statement leaves nothing: its earlier statements are
// rolled back, its version is not recorded, the migrations before it stay, and the error names
// its file. Once the file is fixed, Up applies it.
func TestFailedMigrationLeavesNothing(t *testing.T) {
	t.Parallel()
	_, url := dbtest.EmptySchema(t)
	pool := dbtest.Open(t, url, 2)
	ctx := context.Background()
	fsys := files(map[string]string{
		"0001_good.sql": `CREATE TABLE good (x integer);`,
		"0002_bad.sql":  `CREATE TABLE half (x integer); INSERT INTO half VALUES (1); SELECT no_such_function();`,
		"0003_next.sql": `CREATE TABLE next (x integer);`,
	})
	done, err := migrate.UpFrom(ctx, pool, fsys)
	if err == nil {
		t.Fatal("Up of a failing migration returned no error")
	}
	if !strings.Contains(err.Error(), "0002_bad.sql") || !strings.Contains(err.Error(), "no_such_function") {
		t.Errorf("error %q does not name the file and the failing statement's cause", err)
	}
	if !slices.Equal(done, []int{1}) {
		t.Errorf("Up reported %v applied, want [1]", done)
	}
	exists := func(table string) bool {
		var name *string
		if err := pool.QueryRow(ctx, `SELECT to_regclass($1)::text`, table).Scan(&name); err != nil {
			t.Fatal(err)
		}
		return name != nil
	}
	if exists("half") {
		t.Error("the failed migration's first statement was kept (table half exists)")
	}
	if !exists("good") || exists("next") {
		t.Errorf("good exists %v (want true), next exists %v (want false)", exists("good"), exists("next"))
	}
	if got, want := recorded(t, pool), []int{1}; !slices.Equal(got, want) {
		t.Errorf("crawlq_migration has %v, want %v", got, want)
	}

	fsys["0002_bad.sql"] = &fstest.MapFile{Data: []byte(`CREATE TABLE half (x integer);`)}
	if done, err := migrate.UpFrom(ctx, pool, fsys); err != nil || !slices.Equal(done, []int{2, 3}) {
		t.Fatalf("Up after the fix: %v, %v; want [2 3]", done, err)
	}
}
