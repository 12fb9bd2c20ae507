package crawl_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/runlog"
	"crawlq/internal/testwait"
)

const postsSpec = `
name: posts
start_urls: [http://127.0.0.1/]
follow: [{css: a}]
items:
  - match: '/post/'
    css: div.post
    key: author
    fields:
      author: {css: span.author}
      title: {css: h1, required: true}
`

// TestItemsNotStoredForTheirKeyAreCounted: a spider whose item key does not tell items apart (the
// posts' author) loses items without an error: those with no key are dropped, and those whose
// key an earlier item of the run had are not stored. The run counts each in its errors_by_kind
// (as crawlq run shows them, live and at the end), and its log says the first of each with an
// example: 9 posts of 3 authors on 9 pages (6 repeats across pages), a post with no author, a
// page with two posts of one author (a repeat on the page), a post with no title, and a last
// post whose page answers once the live run was read.
func TestItemsNotStoredForTheirKeyAreCounted(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	var links strings.Builder
	post := func(path string, posts ...string) {
		links.WriteString(`<a href="` + path + `">x</a>`)
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "<html><body>"+strings.Join(posts, "")+"</body></html>")
		})
	}
	div := func(author, title string) string {
		s := `<div class="post">`
		if title != "" {
			s += "<h1>" + title + "</h1>"
		}
		if author != "" {
			s += `<span class="author">` + author + "</span>"
		}
		return s + "</div>"
	}
	for i := 1; i <= 9; i++ {
		post(fmt.Sprintf("/post/%d", i), div(fmt.Sprintf("a%d", i%3), fmt.Sprintf("post %d", i)))
	}
	post("/post/keyless", div("", "nobody's post"))
	post("/post/two", div("b", "first of b"), div("b", "second of b"))
	post("/post/untitled", div("c", ""))
	// One page answers only once the test has read the live run: until then the run is running.
	release := make(chan struct{})
	links.WriteString(`<a href="/post/late">x</a>`)
	mux.HandleFunc("/post/late", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, "<html><body>"+div("z", "late post")+"</body></html>")
	})
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<html><body>"+links.String()+"</body></html>")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	pool := dbtest.Pool(t)
	logs := runlog.Postgres{Pool: pool}
	n, _ := startNode(t, pool, node.Config{Spiders: registry(t, postsSpec), Workers: 1, Worker: queue.WorkerConfig{Concurrency: 4}, RunLog: logs})
	ctx := context.Background()
	s, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "posts", Args: map[string]string{"base_url": srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"items_duplicate_key": 7, "items_dropped_no_key": 1, "items_dropped_missing_field": 1}
	kindsAre := func(k map[string]int64) bool {
		for kind, n := range want {
			if k[kind] != n {
				return false
			}
		}
		return true
	}
	live := testwait.For(t, "the live run's counts", func() (*crawl.Run, bool) {
		r, err := n.Crawler.Get(ctx, s.RunID)
		if err != nil {
			t.Fatal(err)
		}
		return r, kindsAre(r.Stats.ErrorsByKind)
	})
	if live.State != crawl.StateRunning || live.Stats.Items != 4 {
		t.Errorf("live run %s with %d items; want running with 4", live.State, live.Stats.Items)
	}
	close(release)
	r := waitRun(t, n.Crawler, s.RunID, time.Minute)
	stored, err := items.CountItems(ctx, pool, s.RunID)
	if err != nil {
		t.Fatal(err)
	}
	k := r.Stats.ErrorsByKind
	if r.State != crawl.StateSucceeded || stored != 5 || r.Stats.Items != 5 {
		t.Fatalf("run %s, %d items stored, %d in its stats; want succeeded with 5 (a0, a1, a2, b, z)", r.State, stored, r.Stats.Items)
	}
	if !kindsAre(k) {
		t.Errorf("errors_by_kind %v; want items_duplicate_key 7 (6 across pages, 1 on a page), items_dropped_no_key 1, items_dropped_missing_field 1", k)
	}
	if r.Stats.Errors != 0 {
		t.Errorf("errors %d; want none: an item not stored fails no page", r.Stats.Errors)
	}
	// The repeats across pages are said once the run finished, after its state changed.
	var all string
	testwait.Until(t, "the run log's line on the repeats across pages", func() bool {
		lines, err := runlog.ReadAll(ctx, logs, s.RunID, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var text []string
		for _, l := range lines {
			text = append(text, l.Text)
		}
		all = strings.Join(text, "\n")
		return strings.Contains(all, "from another page")
	})
	for _, want := range []string{
		"on " + srv.URL + "/post/keyless has no key (author): not stored",
		"on " + srv.URL + "/post/untitled has no title, a required field: not stored",
		"1 item(s) on " + srv.URL + "/post/two repeat the key of an earlier item on the page",
		"items not stored: 6 item(s) had the key of an earlier item of the run from another page",
		`E.g. key "a`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the run log does not say %q:\n%s", want, all)
		}
	}
}
