package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/urlstate"
)

// listchanges pages through a run's new, changed and gone items by change then key (a key with
// a "/" too), with the run's counts, unchanged items included.
func TestListChanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id := f.ok(t, `{"action":"schedule","spider":"demo","delay_seconds":3600}`)["jobid"].(string)
	var run int64
	fmt.Sscan(id, &run)
	var b urlstate.Batch
	b.Add(&urlstate.Page{Key: urlstate.Key{Spider: "demo", Line: "l", URL: "http://a.test/1"}, RunID: run, Fetched: true, Keep: time.Hour,
		Status: 200, Changes: []urlstate.Change{{Key: "b", Change: urlstate.ChangeNew}, {Key: "a", Change: urlstate.ChangeNew},
			{Key: "c", Change: urlstate.ChangeChanged}, {Key: "d/x", Change: urlstate.ChangeGone}},
		Counts: urlstate.Counts{New: 2, Changed: 1, Unchanged: 5, Gone: 1}})
	var pb pgx.Batch
	if err := b.Queue(&pb, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := f.pool.SendBatch(context.Background(), &pb).Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	after := ""
	for range 4 {
		out := f.ok(t, `{"action":"listchanges","job":"`+id+`","limit":3,"after":"`+after+`"}`)
		for _, c := range out["changes"].([]any) {
			c := c.(map[string]any)
			got = append(got, fmt.Sprint(c["change"], " ", c["key"], " ", c["url"]))
		}
		if counts := fmt.Sprint(out["counts"]); counts != "map[changed:1 gone:1 new:2 unchanged:5]" {
			t.Errorf("counts %s", counts)
		}
		if after = out["next"].(string); after == "" {
			break
		}
	}
	want := "[changed c http://a.test/1 gone d/x http://a.test/1 new a http://a.test/1 new b http://a.test/1]"
	if fmt.Sprint(got) != want {
		t.Errorf("changes %v, want %s", got, want)
	}
	if out := f.call(t, `{"action":"listchanges","job":999999}`); out["status"] != "error" {
		t.Errorf("unknown run: %v", out)
	}
}
