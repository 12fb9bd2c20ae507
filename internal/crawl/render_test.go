package crawl_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"crawlq/internal/artifact"
	"crawlq/internal/browser"
	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/demosite"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/queue"
	"crawlq/internal/runlog"
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

// A rendered page that fails keeps what it looked like for the operator: its screenshot and its
// HTML are in the run's artifacts (Postgres here), and the run's log line of the failure names
// them. A page that renders keeps nothing.
func TestFailedRenderKeepsScreenshotAndHTML(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><body><a href="/p/1">1</a> <a href="/gone">gone</a></body></html>`)
	})
	mux.HandleFunc("/p/1", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><body><div class="product"><h1 class="title">Item 1</h1><span class="sku">sku-1</span></div></body></html>`)
	})
	mux.HandleFunc("/gone", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `<html><body><div id="why"></div><script>document.getElementById("why").textContent = "withdrawn by " + "script";</script></body></html>`)
	})
	base := serveHandler(t, mux)
	pool := dbtest.Pool(t)
	n, _ := startNode(t, pool, node.Config{Spiders: registry(t, renderSpec("render: browser\n")), Queues: []string{"long"}, Workers: 1,
		Worker: queue.WorkerConfig{Concurrency: 2}, Browser: &browser.Config{TabsPerBrowser: 2}})
	ctx := context.Background()
	s, err := n.Crawler.Schedule(ctx, crawl.ScheduleParams{Spider: "js", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n.Crawler, s.RunID, 2*time.Minute)
	if r.Stats.Pages != 2 || r.Stats.ErrorsByKind["status_4xx"] != 1 {
		t.Fatalf("run %s, %d pages (%v); want 2 pages and a 404", r.State, r.Stats.Pages, r.Stats.ErrorsByKind)
	}
	store := artifact.Store{Pool: pool}
	kept, err := store.List(ctx, s.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || kept[0].URL != base+"/gone" || kept[0].PNGBytes == 0 || !strings.Contains(kept[0].Err, "404") {
		t.Fatalf("kept %+v; want the 404 page only, with a screenshot", kept)
	}
	png, err := store.Read(ctx, s.RunID, kept[0].Name+".png")
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot: %d bytes, %v; want a PNG", len(png), err)
	}
	html, err := store.Read(ctx, s.RunID, kept[0].Name+".html")
	if err != nil || !strings.Contains(string(html), "withdrawn by script") {
		t.Fatalf("HTML %q, %v; want the DOM as the script left it", html, err)
	}
	lines, err := runlog.ReadAll(ctx, runlog.Postgres{Pool: pool}, s.RunID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var named bool
	for _, l := range lines {
		named = named || (strings.Contains(l.Text, base+"/gone") && strings.Contains(l.Text, kept[0].Name+".png, "+kept[0].Name+".html") &&
			strings.Contains(l.Text, fmt.Sprintf("crawlq artifacts %d", s.RunID)))
	}
	if !named {
		t.Fatalf("no run log line names the kept files %s.png and .html:\n%v", kept[0].Name, lines)
	}
}

// The demo site's script-drawn pages: the browser spider yields exactly their items, each once;
// the plain spider fetches the same pages and yields none. Its lazy list, scrolled, yields every
// item; not scrolled, only the first ones drawn.
func TestDemoSiteScriptPagesNeedABrowser(t *testing.T) {
	t.Parallel()
	site, base := serveDemo(t, demosite.Config{Items: 30, PerPage: 10})
	exp := site.JSExpected()
	lazy := `
name: lazy
start_urls: [http://127.0.0.1` + demosite.JSPrefix + `lazy.html]
render: browser
items:
  - css: li.product
    key: sku
    fields:
      sku: {css: span.sku, required: true}
`
	for _, tc := range []struct {
		name, spec, queue string
		pages, items      int64
	}{
		{"browser", demosite.JSSpec("js", true), "long", int64(exp.Pages), int64(exp.Items)},
		{"plain", demosite.JSSpec("js", false), "crawl", int64(exp.Pages), 0},
		{"lazy", lazy + "scroll: true\n", "long", 1, int64(exp.Items)},
		{"lazy-unscrolled", lazy + "wait_for: li.product\n", "long", 1, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := dbtest.Pool(t)
			n, _ := startNode(t, pool, node.Config{Spiders: registry(t, tc.spec), Queues: []string{tc.queue}, Workers: 1,
				Worker: queue.WorkerConfig{Concurrency: 4}, Browser: &browser.Config{TabsPerBrowser: 4}})
			name := "js"
			if strings.HasPrefix(tc.name, "lazy") {
				name = "lazy"
			}
			s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: name, Args: map[string]string{"base_url": base}})
			if err != nil {
				t.Fatal(err)
			}
			r := waitRun(t, n.Crawler, s.RunID, 3*time.Minute)
			stored, err := items.CountItems(context.Background(), pool, s.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if r.State != crawl.StateSucceeded || stored != tc.items || r.Stats.Items != tc.items || r.Stats.Pages != tc.pages {
				t.Fatalf("run %s: %d items stored (%d counted) from %d pages (%v); want succeeded with %d items from %d pages",
					r.State, stored, r.Stats.Items, r.Stats.Pages, r.Stats.ErrorsByKind, tc.items, tc.pages)
			}
		})
	}
}
