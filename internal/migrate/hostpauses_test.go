package migrate_test

import (
	"context"
	"testing"
	"testing/fstest"

	"crawlq/internal/dbtest"
	"crawlq/internal/migrate"
)

// Migration 21 gives host pauses a counter of their own: the pauses a run stored by an older
// release counted as the errors_by_kind entry host_paused move to host_pauses, in the finished
// run's row and in a live run's stat rows, and the other kinds stay as they were.
func TestHostPausesMoveToTheirCounter(t *testing.T) {
	t.Parallel()
	_, url := dbtest.EmptySchema(t)
	pool := dbtest.Open(t, url, 2)
	ctx := context.Background()
	all, err := migrate.All()
	if err != nil {
		t.Fatal(err)
	}
	before := fstest.MapFS{}
	for _, m := range all {
		if m.Version < 21 {
			before[m.File] = &fstest.MapFile{Data: []byte(m.SQL)}
		}
	}
	if _, err := migrate.UpFrom(ctx, pool, before); err != nil {
		t.Fatalf("Up to 20: %v", err)
	}
	// As the older release left them: a finished run with its pauses folded among the kinds, and
	// a live run with a pause and an error in its stat rows.
	var finished, live int64
	err = pool.QueryRow(ctx, `INSERT INTO crawlq_run (spider, queue, state, errors, errors_by_kind)
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
	if done, err := migrate.Up(ctx, pool); err != nil || len(done) == 0 || done[0] != 21 {
		t.Fatalf("Up from 20: %v, %v; want 21 first", done, err)
	}

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
