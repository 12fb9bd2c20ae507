package crawl_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"crawlq/internal/browser"
	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/queue"
)

// jsSite serves a listing linking to three item pages whose product is drawn by a script 200 ms
// after load: a plain fetch sees no product, a rendered page does.
func jsSite(t *testing.T) string {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><body><a href="/p/1">1</a> <a href="/p/2">2</a> <a href="/p/3">3</a></body></html>`)
	})
	mux.HandleFunc("/p/", func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/p/")
		fmt.Fprintf(w, `<html><body><div id="root"></div><script>
setTimeout(function () {
  document.getElementById("root").innerHTML = '<div class="product"><h1 class="title">Item %s</h1><span class="sku">sku-%s</span></div>';
}, 200);
</script></body></html>`, id, id)
	})
	return serveHandler(t, mux)
}

func renderSpec(render string) string {
	s := `
name: js
start_urls: [http://127.0.0.1/]
obey_robots: false
follow:
  - css: a
items:
  - css: div.product
    key: sku
    fields:
      sku: {css: span.sku, required: true}
      title: {css: h1.title, required: true}
`
	if strings.HasPrefix(render, "follow:") {
		s = strings.Replace(s, "follow:\n  - css: a\n", "", 1)
	}
	if render != "" {
		s += render
	}
	return s
}

// A spider with render: browser has its pages rendered by headless Chromium on a process that
// renders (a runner): the items a script draws are found, exactly once each, through the same
// parse, once keys and outcomes as a fetched page. The same spider fetched plainly finds none.
func TestBrowserPagesAreRendered(t *testing.T) {
	t.Parallel()
	base := jsSite(t)
	for _, tc := range []struct {
		name, render string
		queue        string
		want         int64
	}{
		{"browser", "render: browser\nwait_for: networkidle\n", "long", 3},
		// Only the item pages, through their follow rule: the listing is fetched plainly.
		{"rule", "follow: [{css: a, render: browser}]\nwait_for: networkidle\n", "long", 3},
		{"http", "", "crawl", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := dbtest.Pool(t)
			n, _ := startNode(t, pool, node.Config{Spiders: registry(t, renderSpec(tc.render)), Queues: []string{tc.queue}, Workers: 1,
				Worker: queue.WorkerConfig{Concurrency: 2}, Browser: &browser.Config{TabsPerBrowser: 2}})
			s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "js", Args: map[string]string{"base_url": base}})
			if err != nil {
				t.Fatal(err)
			}
			r := waitRun(t, n.Crawler, s.RunID, 2*time.Minute)
			stored, err := items.CountItems(context.Background(), pool, s.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if r.State != crawl.StateSucceeded || stored != tc.want || r.Stats.Pages != 4 {
				t.Fatalf("run %s, %d items stored, %d pages (%v); want succeeded with %d items from 4 pages",
					r.State, stored, r.Stats.Pages, r.Stats.ErrorsByKind, tc.want)
			}
		})
	}
}
