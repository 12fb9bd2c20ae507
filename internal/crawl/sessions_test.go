package crawl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"crawlq/internal/browser"
	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/proxy/proxytest"
	"crawlq/internal/queue"
)

// sessionSite serves two branches, /a and /b: each start page sets its visitor cookie and links
// to three item pages showing the visitor cookie they were sent. With ban, /b/2 answers 403 the
// first time visitor b asks for it. A connection per request, so each goes through a tunnel of
// its own when proxied.
func sessionSite(t *testing.T, ban bool) string {
	var mu sync.Mutex
	bannedOnce := false
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		visitor := ""
		if ck, err := r.Cookie("visitor"); err == nil {
			visitor = ck.Value
		}
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		switch len(parts) {
		case 1: // a start page: /a or /b
			if parts[0] != "a" && parts[0] != "b" {
				// Chromium's own /favicon.ico request: a start page's cookie set from it would
				// overwrite the branch's visitor.
				http.NotFound(w, r)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: "visitor", Value: parts[0], Path: "/"})
			for i := 1; i <= 3; i++ {
				fmt.Fprintf(w, `<a href="/%s/%d">%d</a> `, parts[0], i, i)
			}
		case 2:
			mu.Lock()
			b := ban && r.URL.Path == "/b/2" && visitor == "b" && !bannedOnce
			bannedOnce = bannedOnce || b
			mu.Unlock()
			if b {
				w.WriteHeader(http.StatusForbidden)
				fmt.Fprint(w, "Access denied")
				return
			}
			fmt.Fprintf(w, `<div class="product"><span class="sku">%s</span><span class="visitor">%s</span></div>`, r.URL.Path, visitor)
		}
	})
	return serveHandler(t, mux)
}

const sessionSpec = `
name: sess
start_urls: [http://127.0.0.1/a, http://127.0.0.1/b]
obey_robots: false
sessions: 2
ban: {status: [403]}
follow:
  - css: a
items:
  - css: div.product
    key: sku
    fields:
      sku: {css: span.sku, required: true}
      visitor: {css: span.visitor}
`

type sessionItem struct{ Sku, Visitor string }

// runSessions crawls spec over base and returns the run, its items and the process log.
func runSessions(t *testing.T, spec, base string) (*crawl.Run, []sessionItem, string) {
	var logBuf syncBuffer
	pool := dbtest.Pool(t)
	n, _ := startNode(t, pool, node.Config{Spiders: registry(t, spec), Workers: 2, Worker: queue.WorkerConfig{Concurrency: 2},
		Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "sess", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n.Crawler, s.RunID, time.Minute)
	its, err := items.ListItems(context.Background(), pool, s.RunID, 100)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]sessionItem, len(its))
	for i, it := range its {
		if err := json.Unmarshal(it.Data, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return r, out, logBuf.String()
}

// A spider with sessions: 2 crawls as two visitors: each start page sets its visitor's cookie and
// every follow-up sends it back (across page jobs, taken by any of the workers), so each item
// shows its own branch's visitor. A page that bans its visitor retires the session: its retry
// comes in a new session, without the banned cookie (and so do its session's pages after it).
func TestSessionsKeepCookiesAndRetireBannedOnes(t *testing.T) {
	t.Parallel()
	r, its, procLog := runSessions(t, sessionSpec, sessionSite(t, true))
	if r.State != crawl.StateSucceeded || len(its) != 6 || r.Stats.ErrorsByKind["banned"] != 1 {
		t.Fatalf("run %s, %d items, stats %v; want succeeded, 6 items, 1 ban", r.State, len(its), r.Stats.ErrorsByKind)
	}
	for _, it := range its {
		want := it.Sku[1:2] // the branch: a or b
		switch {
		case it.Sku == "/b/2":
			want = "" // retried in a new session, after the ban
		case want == "b" && it.Visitor == "":
			want = "" // fetched after the ban retired its session: in a new one too
		}
		if it.Visitor != want {
			t.Errorf("item %s seen by visitor %q, want %q", it.Sku, it.Visitor, want)
		}
	}
	if !strings.Contains(procLog, "session retired") {
		t.Errorf("the process log does not say the banned session was retired")
	}
}

// A session keeps its proxy: two sessions over three proxies use two of them, each for all of
// its branch's four pages (per-request rotation would spread them over all three).
func TestSessionsKeepTheirProxy(t *testing.T) {
	t.Parallel()
	ps := []*proxytest.Proxy{proxytest.NewHTTP(t, proxytest.HTTPOptions{}), proxytest.NewHTTP(t, proxytest.HTTPOptions{}), proxytest.NewSOCKS5(t, "", "")}
	spec := sessionSpec + fmt.Sprintf("proxies: [%s, %s, %s]\n", ps[0].URL, ps[1].URL, ps[2].URL)
	r, its, _ := runSessions(t, spec, sessionSite(t, false))
	if r.State != crawl.StateSucceeded || len(its) != 6 {
		t.Fatalf("run %s, %d items, stats %v; want succeeded, 6 items", r.State, len(its), r.Stats.ErrorsByKind)
	}
	for _, it := range its {
		if it.Visitor != it.Sku[1:2] {
			t.Errorf("item %s seen by visitor %q", it.Sku, it.Visitor)
		}
	}
	var got []int64
	for _, p := range ps {
		got = append(got, p.Tunnels.Load())
	}
	if fmt.Sprint(got) != "[4 4 0]" {
		t.Errorf("tunnels per proxy %v, want [4 4 0]", got)
	}
}

// Rendered pages keep their session's cookies: Chromium's browser context of each page starts
// with the session's jar, and what the page set (its response's Set-Cookie, and a script's
// document.cookie) goes into the session its follow-ups carry. Each item page shows the cookies
// it was sent: its branch's visitor, and the one the start page's script set.
func TestRenderedPagesKeepTheirSessionCookies(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		switch len(parts) {
		case 1: // a start page: /a or /b
			if parts[0] != "a" && parts[0] != "b" {
				// Chromium's own /favicon.ico request: a start page's cookie set from it would
				// overwrite the branch's visitor.
				http.NotFound(w, r)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: "visitor", Value: parts[0], Path: "/"})
			fmt.Fprintf(w, `<html><body><script>document.cookie = "js=%s-script; path=/";</script>`, parts[0])
			for i := 1; i <= 3; i++ {
				fmt.Fprintf(w, `<a href="/%s/%d">%d</a> `, parts[0], i, i)
			}
			fmt.Fprint(w, `</body></html>`)
		case 2:
			visitor, js := "", ""
			if ck, err := r.Cookie("visitor"); err == nil {
				visitor = ck.Value
			}
			if ck, err := r.Cookie("js"); err == nil {
				js = ck.Value
			}
			fmt.Fprintf(w, `<html><body><div class="product"><span class="sku">%s</span><span class="visitor">%s</span><span class="js">%s</span></div></body></html>`, r.URL.Path, visitor, js)
		}
	})
	base := serveHandler(t, mux)
	spec := strings.Replace(sessionSpec, "sessions: 2\n", "sessions: 2\nrender: browser\n", 1) +
		"      js: {css: span.js}\n"
	pool := dbtest.Pool(t)
	n, _ := startNode(t, pool, node.Config{Spiders: registry(t, spec), Queues: []string{"long"}, Workers: 1,
		Worker: queue.WorkerConfig{Concurrency: 2}, Browser: &browser.Config{TabsPerBrowser: 2}})
	s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "sess", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n.Crawler, s.RunID, 2*time.Minute)
	its, err := items.ListItems(context.Background(), pool, s.RunID, 100)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != crawl.StateSucceeded || len(its) != 6 {
		t.Fatalf("run %s, %d items, stats %v; want succeeded, 6 items", r.State, len(its), r.Stats.ErrorsByKind)
	}
	for _, it := range its {
		var got struct{ Sku, Visitor, JS string }
		if err := json.Unmarshal(it.Data, &got); err != nil {
			t.Fatal(err)
		}
		branch := got.Sku[1:2]
		if got.Visitor != branch || got.JS != branch+"-script" {
			t.Errorf("rendered item %s was sent visitor %q and js %q; want %q and %q", got.Sku, got.Visitor, got.JS, branch, branch+"-script")
		}
	}
}
