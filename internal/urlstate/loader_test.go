package urlstate

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/dbtest"
	"crawlq/internal/testwait"
)

// gatedDB counts the statements sent through it and holds the first until gate closes.
type gatedDB struct {
	dbsqlc.DBTX
	n    atomic.Int32
	gate chan struct{}
}

func (g *gatedDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if g.n.Add(1) == 1 {
		<-g.gate
	}
	return g.DBTX.Query(ctx, sql, args...)
}

func (g *gatedDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return g.DBTX.Exec(ctx, sql, args...)
}

// Pages that ask for their states while a read is in flight are read together in the next one
// statement per line, each getting its own URL's state (nil for a URL no run reached), and the
// states of another line are not mixed in.
func TestLoaderReadsWaitingPagesTogether(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b Batch
	for i := range 50 {
		u := fmt.Sprintf("http://a.test/%d", i)
		b.Add(&Page{Key: Key{"s", "l1", u}, RunID: 1, Fetched: true, Keep: time.Hour, Status: 200, ETag: "e" + u,
			Items: map[string]string{fmt.Sprint(i): "h"}})
		b.Add(&Page{Key: Key{"s", "l2", u}, RunID: 1, Fetched: true, Keep: time.Hour, Status: 200, ETag: "other"})
	}
	var pb pgx.Batch
	if err := b.Queue(&pb, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := pool.SendBatch(ctx, &pb).Close(); err != nil {
		t.Fatal(err)
	}
	db := &gatedDB{DBTX: pool, gate: make(chan struct{})}
	l := NewLoader(dbsqlc.New(db))
	first := make(chan error, 1)
	go func() { _, err := l.Load(ctx, Key{"s", "l1", "http://a.test/first"}); first <- err }()
	testwait.Until(t, "the first read in flight", func() bool { return db.n.Load() == 1 })
	const n = 65 // of line l1: 50 with a state, 10 without; 5 of line l2
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			u := fmt.Sprintf("http://a.test/%d", i%60)
			line := "l1"
			if i >= 60 {
				line = "l2"
			}
			st, err := l.Load(ctx, Key{"s", line, u})
			switch {
			case err != nil:
				errs <- err
			case i >= 60 && (st == nil || st.ETag != "other"):
				errs <- fmt.Errorf("%s of l2: state %+v", u, st)
			case i < 50 && (st == nil || st.ETag != "e"+u || st.Items[fmt.Sprint(i)] != "h"):
				errs <- fmt.Errorf("%s: state %+v", u, st)
			case i >= 50 && i < 60 && st != nil:
				errs <- fmt.Errorf("%s: no run reached it, got %+v", u, st)
			}
		})
	}
	testwait.Until(t, "every load waiting", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.waiting) == n
	})
	close(db.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := db.n.Load(); got != 3 {
		t.Errorf("%d statements for %d loads, want 3: the first, then one per line for the %d that waited for it", got, n+1, n)
	}
}
