package queue_test

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"crawlq/internal/dbtest"
	"crawlq/internal/logtest"
	"crawlq/internal/queue"
	"crawlq/internal/testwait"
)

// A worker that stops while the database refuses its connections (a role's connection limit:
// SQLSTATE 53300, as RDS Proxy or max_connections answer) hands its jobs back once the database
// takes connections again, instead of giving up at once and leaving them to expire and be
// rescued at the cost of an attempt each.
func TestStopWhileDatabaseRefusesCostsNoAttempt(t *testing.T) {
	t.Parallel()
	schema, dsn := dbtest.Schema(t)
	admin := dbtest.Open(t, dsn, 2)
	role := "r_" + strings.TrimPrefix(schema, "t_")
	ctx := ctxT(t)
	for _, q := range []string{
		`CREATE ROLE ` + role + ` LOGIN`,
		`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + role,
		`GRANT ALL ON ALL TABLES IN SCHEMA ` + schema + ` TO ` + role,
		`GRANT ALL ON ALL SEQUENCES IN SCHEMA ` + schema + ` TO ` + role,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		a := dbtest.Open(t, dbtest.URL(t), 1)
		if _, err := a.Exec(ctx, `DROP OWNED BY `+role+`; DROP ROLE `+role); err != nil {
			t.Errorf("drop role: %v", err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	limited := dbtest.Open(t, u.String(), 4)

	const n = 4
	ac := queue.New(admin, queue.Config{})
	var ids []int64
	for range n {
		r, err := ac.Enqueue(ctx, queue.EnqueueParams{Queue: "q", Kind: "noop"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	logs := &logtest.Records{}
	started := make(chan int64, n)
	w, err := queue.NewWorker(queue.New(limited, queue.Config{}), queue.WorkerConfig{Queue: "q", Concurrency: n, StopGrace: 50 * time.Millisecond,
		Logger: slog.New(logs)}, func(ctx context.Context, j *queue.Job) error {
		started <- j.ID
		<-ctx.Done() // holds the job until the stop cancels it
		return context.Cause(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	for range n {
		<-started
	}
	// The database now refuses the worker: no new connection for its role, and the open ones
	// closed.
	if _, err := admin.Exec(ctx, `ALTER ROLE `+role+` CONNECTION LIMIT 0`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role); err != nil {
		t.Fatal(err)
	}
	stop()
	refused := func() bool {
		for _, l := range logs.At(slog.LevelWarn) {
			if strings.Contains(l, "retrying") && strings.Contains(l, "53300") {
				return true
			}
		}
		return false
	}
	testwait.Until(t, "the database refuses the worker", func() bool {
		if refused() {
			return true
		}
		select {
		case err := <-done:
			t.Fatalf("the worker stopped (%v) while the database refused it; its logs: %q", err, logs.At(slog.LevelWarn))
		default:
		}
		return false
	})
	if _, err := admin.Exec(ctx, `ALTER ROLE `+role+` CONNECTION LIMIT -1`); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("worker stop: %v; want every job handed back once the database took connections again", err)
	}
	for _, id := range ids {
		j, err := ac.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != queue.StateAvailable || j.Attempt != 0 {
			t.Errorf("job %d: %s at attempt %d; want available with no attempt counted", id, j.State, j.Attempt)
		}
	}
}
