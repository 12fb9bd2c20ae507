package queue_test

import (
	"fmt"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"crawlq/internal/clock"
	"crawlq/internal/dbtest"
	"crawlq/internal/migrate"
	"crawlq/internal/queue"
)

// A once key is kept on its job: enqueuing with one writes no row besides the job, retention passes
// such a job over while its parent may still enqueue, and DeleteOnceKeys takes it with the key. A
// database migrated from before keys moved onto jobs still refuses the keys it had stored apart,
// and a previous release's key insert for a key a job holds is dropped.
func TestOnceKeysLiveOnTheirJobs(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	_, url := dbtest.EmptySchema(t)
	pool := dbtest.Open(t, url, 4)
	all, err := migrate.All()
	if err != nil {
		t.Fatal(err)
	}
	before := fstest.MapFS{}
	for _, m := range all {
		if m.Version < 15 {
			before[m.File] = &fstest.MapFile{Data: []byte(m.SQL)}
		}
	}
	if _, err := migrate.UpFrom(ctx, pool, before); err != nil {
		t.Fatal(err)
	}
	// A key stored by the previous release, its job already deleted by retention.
	if _, err := pool.Exec(ctx, `INSERT INTO crawlq_job_once (parent_id, h) VALUES (1, md5('old')::uuid)`); err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewStopped(time.Now().Truncate(time.Microsecond))
	c := queue.New(pool, queue.Config{Clock: clk})
	p := func(key string) queue.EnqueueParams {
		return queue.EnqueueParams{Queue: "q", Kind: "page", ParentID: 1, OnceKey: key}
	}
	res, err := c.EnqueueMany(ctx, []queue.EnqueueParams{p("old"), p("new"), {Queue: "q", Kind: "plain", ParentID: 1}})
	if err != nil || !res[0].Duplicate || res[1].ID == 0 || res[2].ID == 0 {
		t.Fatalf("enqueue after the migration: %+v %v; want old a duplicate (stored before), new and plain in", res, err)
	}
	var apart int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM crawlq_job_once`).Scan(&apart); err != nil || apart != 1 {
		t.Fatalf("once keys stored apart from their jobs: %d %v; want only the one from before", apart, err)
	}
	// A previous release's process, still running during a deploy, stores its keys apart: one a
	// job holds is dropped, so that process sees it as used.
	if _, err := pool.Exec(ctx, `INSERT INTO crawlq_job_once (parent_id, h) VALUES (1, md5('new')::uuid)`); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM crawlq_job_once`).Scan(&apart); err != nil || apart != 1 {
		t.Fatalf("a key a job holds was stored apart too: %d rows %v", apart, err)
	}
	for _, j := range claim(t, c, 10, time.Minute) {
		if err := c.Complete(ctx, j.Lease()); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(2 * time.Hour)
	if n, err := c.Retention(ctx, queue.RetentionParams{MaxAge: time.Hour}); err != nil || n != 1 {
		t.Fatalf("retention deleted %d %v; want the plain job only", n, err)
	}
	if n, err := c.PurgeFinished(ctx, "q", queue.Cutoffs{Succeeded: clk.Now()}, 100); err != nil || n != 0 {
		t.Fatalf("purge deleted %d %v; want nothing: the job holds its parent's key", n, err)
	}
	if res, err := c.EnqueueMany(ctx, []queue.EnqueueParams{p("new")}); err != nil || !res[0].Duplicate {
		t.Fatalf("a finished job's key after retention: %+v %v; want a duplicate", res, err)
	}
	n, _, err := c.DeleteOnceKeys(ctx, 1, [16]byte{}, 100)
	if err != nil || n != 2 {
		t.Fatalf("delete once keys: %d %v; want 2 (old, and new with its job)", n, err)
	}
	if a, s := actualCounts(t, pool), statCounts(t, c); len(a) != 0 || fmt.Sprint(a) != fmt.Sprint(s) {
		t.Fatalf("after deleting the keys: rows %v, counts %v; want none", a, s)
	}
	res, err = c.EnqueueMany(ctx, []queue.EnqueueParams{p("old"), p("new")})
	if err != nil || res[0].ID == 0 || res[1].ID == 0 {
		t.Fatalf("keys deleted: %+v %v; want both in again", res, err)
	}
}

// Concurrent enqueues of one once key, plain and held, insert it once, and each answer pairs the
// jobs it inserted with their positions.
func TestOnceKeyRacesInsertOnce(t *testing.T) {
	t.Parallel()
	c, pool := newClient(t)
	ctx := ctxT(t)
	const n = 8
	var wg sync.WaitGroup
	ids := make(chan int64, 4*n)
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := fmt.Sprintf("own-%d", i)
			ps := []queue.EnqueueParams{
				{Queue: "q", Kind: "page", ParentID: 3, OnceKey: "shared", Args: []byte(`{"k":"shared"}`)},
				{Queue: "q", Kind: "page", ParentID: 3, OnceKey: own, Args: []byte(`{"k":"` + own + `"}`)},
			}
			tx, err := pool.Begin(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer func() { _ = tx.Rollback(ctx) }()
			out, err := c.EnqueueLimitedTx(ctx, tx, ps, 0)
			if err == nil {
				err = tx.Commit(ctx)
			}
			if err != nil {
				errs <- err
				return
			}
			if out[1].ID == 0 {
				errs <- fmt.Errorf("goroutine %d: its own key was not inserted: %+v", i, out)
				return
			}
			for k, o := range out {
				if o.ID == 0 {
					continue
				}
				var got string
				if err := pool.QueryRow(ctx, `SELECT args->>'k' FROM crawlq_job WHERE id = $1`, o.ID).Scan(&got); err != nil || got != []string{"shared", own}[k] {
					errs <- fmt.Errorf("goroutine %d: result %d is job %d with key %q %v", i, k, o.ID, got, err)
					return
				}
				ids <- o.ID
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	close(ids)
	if len(ids) != n+1 {
		t.Fatalf("%d jobs inserted; want %d (shared once, and each goroutine's own)", len(ids), n+1)
	}
	var shared int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM crawlq_job WHERE args->>'k' = 'shared'`).Scan(&shared); err != nil || shared != 1 {
		t.Fatalf("jobs with the shared key: %d %v", shared, err)
	}
	if a, s := actualCounts(t, pool), statCounts(t, c); fmt.Sprint(a) != fmt.Sprint(s) {
		t.Fatalf("counts %v, rows %v", s, a)
	}
}
