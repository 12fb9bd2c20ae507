package dbtest_test

import (
	"context"
	"testing"
	"time"

	"crawlq/internal/dbtest"
)

// A schema a test filled comes back to the next test of the process empty, with its identities
// restarted and its migrations recorded, as a fresh migration leaves it.
func TestReusedSchemaIsAsFresh(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var first string
	var firstID int64
	t.Run("fill", func(t *testing.T) {
		name, url := dbtest.Schema(t)
		first = name
		pool := dbtest.Open(t, url, 2)
		if err := pool.QueryRow(ctx, `INSERT INTO crawlq_job (queue, kind, args) VALUES ('q', 'k', '{}') RETURNING id`).Scan(&firstID); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("reuse", func(t *testing.T) {
		name, url := dbtest.Schema(t)
		if name != first {
			t.Fatalf("got schema %s, want %s again", name, first)
		}
		pool := dbtest.Open(t, url, 2)
		var jobs, migrations int
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM crawlq_job), (SELECT count(*) FROM crawlq_migration)`).Scan(&jobs, &migrations); err != nil {
			t.Fatal(err)
		}
		if jobs != 0 || migrations == 0 {
			t.Fatalf("reused schema has %d jobs and %d migrations recorded, want 0 and all", jobs, migrations)
		}
		var id int64
		if err := pool.QueryRow(ctx, `INSERT INTO crawlq_job (queue, kind, args) VALUES ('q', 'k', '{}') RETURNING id`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if id != firstID {
			t.Fatalf("first job id %d in the reused schema, want %d as in a fresh one", id, firstID)
		}
	})
}
