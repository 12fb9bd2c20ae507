package crawl

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/clock"
	"crawlq/internal/dbtest"
	"crawlq/internal/items"
	"crawlq/internal/queue"
	"crawlq/internal/spider"
)

// A session retired by one worker process is retired for the others: a page of it that another
// crawler takes (its args still carrying the session's cookies) goes on in a new session, without
// them; a session nobody retired keeps its cookies there. Each crawler is a process's, sharing
// only the database.
func TestRetiredSessionSharedAcrossWorkers(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	newCrawler := func() *Crawler {
		pl, err := items.New(items.NewPostgresSink(pool), items.Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(Config{Pool: pool, Queue: queue.New(pool, queue.Config{}), Spiders: spider.NewRegistry(), Pipeline: pl})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := newCrawler(), newCrawler()
	ri := &runInfo{id: 41, settings: spider.Settings{Sessions: 2}}
	page := func(id int64) *pageArgs {
		return &pageArgs{URL: "http://127.0.0.1/p", Session: &sessionArgs{ID: id, Cookies: []sessionCookie{{URL: "http://127.0.0.1/", Set: "visitor=v; Path=/"}}}}
	}
	ctx := context.Background()
	a.retireSession(ctx, ri.id, page(1).Session, "banned: status 403")

	p := page(1)
	if _, err := b.session(ctx, ri, p); err != nil {
		t.Fatal(err)
	}
	if p.Session.ID == 1 || len(cookies(p.Session, p.URL)) != 0 {
		t.Errorf("another process took a page of the retired session 1 in session %d with cookies %v; want a new session without them", p.Session.ID, cookies(p.Session, p.URL))
	}
	p = page(2)
	if _, err := b.session(ctx, ri, p); err != nil {
		t.Fatal(err)
	}
	if p.Session.ID != 2 || len(cookies(p.Session, p.URL)) != 1 {
		t.Errorf("a page of session 2, never retired, went on in session %d with %d cookies; want its own, with its cookie", p.Session.ID, len(cookies(p.Session, p.URL)))
	}
	p = page(1)
	if _, err := b.session(ctx, &runInfo{id: 42, settings: ri.settings}, p); err != nil {
		t.Fatal(err)
	}
	if p.Session.ID != 1 {
		t.Errorf("session 1 of another run was taken for retired")
	}
}

// sessionReads counts the queries on crawlq_session a pool sends.
type sessionReads struct{ n atomic.Int64 }

func (s *sessionReads) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "FROM crawlq_session") {
		s.n.Add(1)
	}
	return ctx
}
func (s *sessionReads) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Whether a page's session was retired costs no database round trip per page: a process reads
// a run's retired sessions once per retiredSync, whatever the pages; a session another process
// retires meanwhile is seen once that bound has passed, and one retired here at once.
func TestRetiredSessionsReadOncePerSync(t *testing.T) {
	t.Parallel()
	_, url := dbtest.Schema(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	reads := &sessionReads{}
	cfg.ConnConfig.Tracer = reads
	traced, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(traced.Close)
	clk := clock.NewStopped(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	newCrawler := func(pool *pgxpool.Pool) *Crawler {
		pl, err := items.New(items.NewPostgresSink(pool), items.Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(Config{Pool: pool, Queue: queue.New(pool, queue.Config{}), Spiders: spider.NewRegistry(), Pipeline: pl, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	other, here := newCrawler(dbtest.Open(t, url, 2)), newCrawler(traced)
	ctx := context.Background()
	other.retireSession(ctx, 41, &sessionArgs{ID: 3}, "banned: status 403")
	for id := int64(1); id <= 50; id++ {
		if got := here.isRetired(ctx, 41, id); got != (id == 3) {
			t.Fatalf("session %d: retired %v", id, got)
		}
	}
	if n := reads.n.Load(); n != 1 {
		t.Fatalf("50 pages of run 41 read its retired sessions %d times; want once", n)
	}
	other.retireSession(ctx, 41, &sessionArgs{ID: 7}, "banned: status 403")
	here.retireSession(ctx, 41, &sessionArgs{ID: 8}, "its proxy rests")
	if here.isRetired(ctx, 41, 7) || !here.isRetired(ctx, 41, 8) {
		t.Fatal("within retiredSync: want session 7 (retired elsewhere) not yet seen, 8 (retired here) seen")
	}
	clk.Advance(retiredSync)
	if !here.isRetired(ctx, 41, 7) {
		t.Fatal("session 7, retired by another process retiredSync ago, is not seen retired")
	}
	if n := reads.n.Load(); n != 2 {
		t.Fatalf("%d reads; want 2 (one per retiredSync)", n)
	}
}
