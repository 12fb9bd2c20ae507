package crawl

import (
	"context"
	"testing"

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
