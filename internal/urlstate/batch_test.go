package urlstate

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
		var b Batch
		for _, p := range pages {
			b.Add(p)
		}
		if b.Len() != 2 {
			t.Fatalf("the batch records %d URLs, want 2", b.Len())
		}
		var pb pgx.Batch
		if err := b.Queue(&pb); err != nil {
			t.Fatal(err)
		}
		if err := pool.SendBatch(ctx, &pb).Close(); err != nil {
			t.Fatal(err)
		}
	}
	a, z := Key{"s", "l", "http://a.test/a"}, Key{"s", "l", "http://a.test/z"}
	state := func(k Key, etag, item string) *Page {
		return &Page{Key: k, RunID: 1, Fetched: true, Keep: time.Hour, Status: 200, ETag: etag,
			Links: []string{"http://a.test/" + item}, Items: map[string]string{item: "h"}}
	}
	touch := func(k Key, etag string) *Page {
		return &Page{Key: k, RunID: 1, Fetched: true, Same: true, Keep: time.Hour, ETag: etag}
	}
	send(state(a, "a1", "first"), state(z, "z1", "first"))
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
