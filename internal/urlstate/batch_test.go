package urlstate

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/dbsqlc"
	"crawlq/internal/dbtest"
)

// A URL recorded twice in one batch keeps its last record, whichever kind each is: a touch after
// a state keeps the stored links and items and takes the touch's validators, and a state after a
// touch is written whole.
func TestBatchKeepsAURLsLastRecord(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	send := func(pages ...*Page) {
		t.Helper()
		if b := sendBatch(t, ctx, pool, pages); b.Len() != 2 {
			t.Fatalf("the batch records %d URLs, want 2", b.Len())
		}
	}
	a, z := Key{"s", "l", "http://a.test/a"}, Key{"s", "l", "http://a.test/z"}
	run := int64(1)
	state := func(k Key, etag, item string) *Page {
		return &Page{Key: k, RunID: run, Fetched: true, Keep: time.Hour, Status: 200, ETag: etag,
			Links: []string{"http://a.test/" + item}, Items: map[string]string{item: "h"}}
	}
	touch := func(k Key, etag string) *Page {
		return &Page{Key: k, RunID: run, Fetched: true, Same: true, Keep: time.Hour, ETag: etag}
	}
	send(state(a, "a1", "first"), state(z, "z1", "first"))
	run = 2 // a run records a URL once (TestBatchClaimsAURLOncePerRun)
	send(state(a, "a2", "second"), touch(a, "a3"), touch(z, "z2"), state(z, "z3", "third"))
	got, err := LoadMany(ctx, dbsqlc.New(pool), "s", "l", []string{a.URL, z.URL})
	if err != nil {
		t.Fatal(err)
	}
	if st := got[a.URL]; st == nil || st.ETag != "a3" || st.Items["first"] != "h" || len(st.Items) != 1 {
		t.Errorf("a state then a touch of %s: state %+v, want etag a3 and the first items kept", a.URL, st)
	}
	if st := got[z.URL]; st == nil || st.ETag != "z3" || st.Items["third"] != "h" || len(st.Items) != 1 {
		t.Errorf("a touch then a state of %s: state %+v, want etag z3 and the third items", z.URL, st)
	}
}

// A URL is recorded once per run: a second record of it in a later batch of the same run (its
// own job and a walk within another page's job, say, at the same moment) writes nothing, and adds
// no counts, changes or page outcome to the run's stats; a later run records it again.
func TestBatchClaimsAURLOncePerRun(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	send := func(pages ...*Page) { t.Helper(); sendBatch(t, ctx, pool, pages) }
	k := Key{"s", "l", "http://a.test/item"}
	state := func(run int64, item string) *Page {
		return &Page{Key: k, RunID: run, Fetched: true, Keep: time.Hour, Status: 200, ETag: "e",
			Items: map[string]string{item: "h"}, Changes: []Change{{item, ChangeNew}}, Counts: Counts{New: 1}}
	}
	walked := func(run int64) *Page {
		return &Page{Key: k, RunID: run, Fetched: true, Same: true, Keep: time.Hour, ETag: "e",
			Counts: Counts{Unchanged: 1}, Kind: "not_modified", Bytes: 10, Walked: true}
	}
	send(state(1, "a"))
	send(state(1, "b")) // the same run again: not written
	send(walked(2))
	send(walked(2))
	send(state(2, "c"))
	got, err := LoadMany(ctx, dbsqlc.New(pool), "s", "l", []string{k.URL})
	if err != nil {
		t.Fatal(err)
	}
	if st := got[k.URL]; st == nil || st.RunID != 2 || len(st.Items) != 1 || st.Items["a"] != "h" {
		t.Errorf("state %+v; want run 2's touch over run 1's first record (item a)", got[k.URL])
	}
	stat := func(run int64, kind string) (pages, n int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT coalesce(sum(pages), 0), coalesce(sum(n), 0) FROM crawlq_run_stat WHERE run_id = $1 AND kind = $2`,
			run, kind).Scan(&pages, &n); err != nil {
			t.Fatal(err)
		}
		return pages, n
	}
	var changes int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM crawlq_item_change`).Scan(&changes); err != nil {
		t.Fatal(err)
	}
	_, newN := stat(1, KindNew)
	_, unch := stat(2, KindUnchanged)
	pages, nm := stat(2, "not_modified")
	walkedPages, walkedN := stat(2, "walked")
	if newN != 1 || unch != 1 || pages != 1 || nm != 1 || walkedPages != 0 || walkedN != 1 || changes != 1 {
		t.Errorf("run 1: %d new; run 2: %d unchanged, %d pages (%d not_modified, %d walked, %d pages of those); %d changes; want each URL counted once a run: 1, 1, 1 (1, 1, 0), 1",
			newN, unch, pages, nm, walkedN, walkedPages, changes)
	}
}

// sendBatch records pages in one batch's statement and returns the batch.
func sendBatch(t *testing.T, ctx context.Context, pool *pgxpool.Pool, pages []*Page) *Batch {
	t.Helper()
	var b Batch
	for _, p := range pages {
		b.Add(p)
	}
	var pb pgx.Batch
	if err := b.Queue(&pb, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := pool.SendBatch(ctx, &pb).Close(); err != nil {
		t.Fatal(err)
	}
	return &b
}
