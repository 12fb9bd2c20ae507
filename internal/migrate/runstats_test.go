package migrate_test

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/dbtest"
	"crawlq/internal/migrate"
)

// upTo applies the embedded migrations up to version last.
func upTo(t *testing.T, pool *pgxpool.Pool, last int) {
	t.Helper()
	all, err := migrate.All()
	if err != nil {
		t.Fatal(err)
	}
	some := fstest.MapFS{}
	for _, m := range all {
		if m.Version <= last {
			some[m.File] = &fstest.MapFile{Data: []byte(m.SQL)}
		}
	}
	if _, err := migrate.UpFrom(context.Background(), pool, some); err != nil {
		t.Fatalf("Up to %d: %v", last, err)
	}
}

// Migration 21 gives host pauses a counter of their own: the pauses a run stored by an older
// release counted as the errors_by_kind entry host_paused move to host_pauses, in the finished
// run's row and in a live run's stat rows, and the other kinds stay as they were.
func TestHostPausesMoveToTheirCounter(t *testing.T) {
	t.Parallel()
	_, url := dbtest.EmptySchema(t)
	pool := dbtest.Open(t, url, 2)
	ctx := context.Background()
	upTo(t, pool, 20)
	// As the older release left them: a finished run with its pauses folded among the kinds, and
	// a live run with a pause and an error in its stat rows.
	var finished, live int64
	err := pool.QueryRow(ctx, `INSERT INTO crawlq_run (spider, queue, state, errors, errors_by_kind)
		VALUES ('s', 'crawl', 'succeeded', 1, '{"host_paused": 2, "status_5xx": 1}') RETURNING id`).Scan(&finished)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO crawlq_run (spider, queue, state) VALUES ('s', 'crawl', 'running') RETURNING id`).Scan(&live); err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(ctx, `INSERT INTO crawlq_run_stat (run_id, pages, errors, kind, n) VALUES
		($1, 0, 0, 'host_paused', 3), ($1, 0, 1, 'status_5xx', 1), ($1, 4, 0, NULL, 1)`, live)
	if err != nil {
		t.Fatal(err)
	}
	upTo(t, pool, 21)

	var pauses int64
	var byKind string
	if err := pool.QueryRow(ctx, `SELECT host_pauses, errors_by_kind::text FROM crawlq_run WHERE id = $1`, finished).Scan(&pauses, &byKind); err != nil {
		t.Fatal(err)
	}
	if pauses != 2 || byKind != `{"status_5xx": 1}` {
		t.Errorf("finished run: host_pauses %d, errors_by_kind %s; want 2 and only status_5xx", pauses, byKind)
	}
	var kinds, errs int64
	err = pool.QueryRow(ctx, `SELECT sum(host_pauses), count(kind), sum(errors) FROM crawlq_run_stat WHERE run_id = $1`, live).Scan(&pauses, &kinds, &errs)
	if err != nil {
		t.Fatal(err)
	}
	if pauses != 3 || kinds != 1 || errs != 1 {
		t.Errorf("live run's stat rows: %d host pauses, %d rows with a kind, %d errors; want 3, 1 (status_5xx) and 1", pauses, kinds, errs)
	}
}

// Migration 23 makes a run's errors count its dead pages from the queue when it finishes, where a
// page's stat rows counted an error when it died. A run live across it has stat rows that counted
// its pages dead so far: it finishes with each of them one error, not two.
func TestLiveRunsDeadPagesCountOnceAfterMigration(t *testing.T) {
	t.Parallel()
	_, url := dbtest.EmptySchema(t)
	pool := dbtest.Open(t, url, 2)
	ctx := context.Background()
	upTo(t, pool, 22)
	// As the older release left a live run: a 404 recorded as it ended, a page dead after its
	// attempts (an error in its last stat row), and a page fetched.
	var live int64
	if err := pool.QueryRow(ctx, `INSERT INTO crawlq_run (spider, queue, state, started_at) VALUES ('s', 'crawl', 'running', now()) RETURNING id`).Scan(&live); err != nil {
		t.Fatal(err)
	}
	_, err := pool.Exec(ctx, `INSERT INTO crawlq_run_stat (run_id, pages, errors, retries, kind, n) VALUES
		($1, 0, 1, 0, 'status_4xx', 1), ($1, 0, 0, 2, 'status_5xx', 2), ($1, 0, 1, 0, 'status_5xx', 1), ($1, 1, 0, 0, NULL, 1)`, live)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(ctx, `INSERT INTO crawlq_job (queue, kind, state, parent_id, attempt) VALUES
		('crawl', 'page', 'dead', $1, 3), ('crawl', 'page', 'succeeded', $1, 1), ('crawl', 'page', 'succeeded', $1, 1)`, live)
	if err != nil {
		t.Fatal(err)
	}
	upTo(t, pool, 23)
	if _, err := dbsqlc.New(pool).FinishRun(ctx, dbsqlc.FinishRunParams{ID: live, DeadPages: 1, FailedPages: "[]", StoredItems: -1}); err != nil {
		t.Fatal(err)
	}
	var errs, retries, dead int64
	if err := pool.QueryRow(ctx, `SELECT errors, retries, dead_pages FROM crawlq_run WHERE id = $1`, live).Scan(&errs, &retries, &dead); err != nil {
		t.Fatal(err)
	}
	if errs != 2 || retries != 2 || dead != 1 {
		t.Errorf("run live across the migration, finished: %d errors, %d retries, %d dead pages; want 2 (the 404 and the dead page), 2 and 1", errs, retries, dead)
	}
}
