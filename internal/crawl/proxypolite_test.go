package crawl_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"crawlq/internal/crawl"
	"crawlq/internal/dbtest"
	"crawlq/internal/items"
	"crawlq/internal/node"
	"crawlq/internal/proxy/proxytest"
	"crawlq/internal/queue"
	"crawlq/internal/runlog"
)

// arrivals is what two target sites saw of a crawl: when each request came and left, and the
// most requests in flight at once across both.
type arrivals struct {
	mu          sync.Mutex
	in, maxIn   int
	starts, end []time.Time
}

// twoSites serves the same shop on two addresses (two hosts, so politeness per host keeps
// nothing serial): a start page on the first links to pages of both, each slow enough to overlap.
func twoSites(t *testing.T, a *arrivals, pages int) (string, string) {
	var other string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.in++
		a.maxIn = max(a.maxIn, a.in)
		a.starts = append(a.starts, time.Now())
		a.mu.Unlock()
		defer func() {
			a.mu.Lock()
			a.in--
			a.end = append(a.end, time.Now())
			a.mu.Unlock()
		}()
		w.Header().Set("Connection", "close")
		if r.URL.Path == "/" {
			for i := 1; i <= pages; i++ {
				fmt.Fprintf(w, `<a href="/p/%d">%d</a> <a href="%s/p/%d">%d</a> `, i, i, other, i+pages, i+pages)
			}
			return
		}
		time.Sleep(30 * time.Millisecond) // the page takes a while, so requests that may overlap do
		fmt.Fprintf(w, `<div class="product"><span class="sku">%s</span></div>`, strings.TrimPrefix(r.URL.Path, "/p/"))
	})
	first := serveHandler(t, h)
	other = serveHandler(t, h)
	return first, other
}

const politeSpec = `
name: polite
start_urls: [http://127.0.0.1/]
obey_robots: false
concurrency: 4
proxies: [%s]
%s
follow:
  - css: a
items:
  - css: div.product
    key: sku
    fields:
      sku: {css: span.sku, required: true}
`

// Politeness per proxy as well as per target host: with proxy_concurrency 1, pages of two hosts
// (4 in flight allowed to each) never overlap through the one proxy; with proxy_delay, each
// request through it starts at least the delay after the previous answer, measured at the sites;
// the sites' robots.txt fetches included, for a spider that obeys it.
func TestPolitenessPerProxy(t *testing.T) {
	t.Parallel()
	const pages = 4
	for _, tc := range []struct {
		name, settings string
		delay          time.Duration
		robots         bool
	}{
		{"concurrency", "proxy_concurrency: 1", 0, false},
		{"delay", "proxy_delay: 150ms", 150 * time.Millisecond, false},
		{"robots", "proxy_delay: 150ms", 150 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var a arrivals
			base, other := twoSites(t, &a, pages)
			px := proxytest.NewHTTP(t, proxytest.HTTPOptions{})
			spec := fmt.Sprintf(politeSpec, px.URL, tc.settings)
			if tc.robots {
				spec = strings.Replace(spec, "obey_robots: false", "obey_robots: true", 1)
			}
			pool := dbtest.Pool(t)
			n, _ := startNode(t, pool, node.Config{Spiders: registry(t, spec), Workers: 1, Worker: queue.WorkerConfig{Concurrency: 8}})
			s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "polite", Args: map[string]string{"base_url": base}})
			if err != nil {
				t.Fatal(err)
			}
			r := waitRun(t, n.Crawler, s.RunID, time.Minute)
			stored, err := items.CountItems(context.Background(), pool, s.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if r.State != crawl.StateSucceeded || stored != 2*pages {
				t.Fatalf("run %s with %d items (%v); want succeeded with %d (other site %s)", r.State, stored, r.Stats.ErrorsByKind, 2*pages, other)
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			if tc.robots && len(a.starts) != 2*pages+3 {
				t.Errorf("%d requests, want %d: the pages and both sites' robots.txt", len(a.starts), 2*pages+3)
			}
			if a.maxIn != 1 {
				t.Errorf("%d requests in flight at once through the one proxy, want 1", a.maxIn)
			}
			for i := 1; i < len(a.starts); i++ {
				if gap := a.starts[i].Sub(a.end[i-1]); gap < tc.delay {
					t.Errorf("request %d started %s after the previous answer, want at least %s", i, gap, tc.delay)
				}
			}
		})
	}
}

// A site that bans by redirecting to a challenge page: each item page's first request is sent
// to /captcha. With ban: {redirect: /captcha} that is a ban, handled as others are: the proxy
// rests, the page goes through another without counting an attempt, every item arrives, and
// the challenge page is never fetched as a page of the crawl.
func TestBanByRedirectToAChallenge(t *testing.T) {
	t.Parallel()
	const pages = 4
	var mu sync.Mutex
	asked := map[string]int{}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		mu.Lock()
		asked[r.URL.Path]++
		n := asked[r.URL.Path]
		mu.Unlock()
		switch {
		case r.URL.Path == "/":
			for i := 1; i <= pages; i++ {
				fmt.Fprintf(w, `<a href="/p/%d">%d</a> `, i, i)
			}
		case r.URL.Path == "/captcha":
			fmt.Fprint(w, `<div class="product"><span class="sku">captcha</span></div>`)
		case n == 1:
			http.Redirect(w, r, "/captcha?from="+r.URL.Path, http.StatusFound)
		default:
			fmt.Fprintf(w, `<div class="product"><span class="sku">%s</span></div>`, strings.TrimPrefix(r.URL.Path, "/p/"))
		}
	})
	base := serveHandler(t, mux)
	ps := []*proxytest.Proxy{proxytest.NewHTTP(t, proxytest.HTTPOptions{}), proxytest.NewHTTP(t, proxytest.HTTPOptions{})}
	spec := fmt.Sprintf(politeSpec, ps[0].URL+", "+ps[1].URL, "ban: {redirect: '/captcha'}")
	pool := dbtest.Pool(t)
	n, _ := startNode(t, pool, node.Config{Spiders: registry(t, spec), Workers: 1, Worker: queue.WorkerConfig{Concurrency: 2},
		ProxyRest: 50 * time.Millisecond})
	s, err := n.Crawler.Schedule(context.Background(), crawl.ScheduleParams{Spider: "polite", Args: map[string]string{"base_url": base}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n.Crawler, s.RunID, time.Minute)
	stored, err := items.CountItems(context.Background(), pool, s.RunID)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	captcha := asked["/captcha"]
	mu.Unlock()
	if r.State != crawl.StateSucceeded || stored != pages || captcha != 0 || r.Stats.ErrorsByKind["banned"] != pages || r.Stats.Errors != 0 {
		t.Fatalf("run %s with %d items, stats %v, the challenge fetched %d times; want succeeded with %d items, %d bans and the challenge never fetched",
			r.State, stored, r.Stats.ErrorsByKind, captcha, pages, pages)
	}
	lines, err := runlog.ReadAll(context.Background(), runlog.Postgres{Pool: pool}, s.RunID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var runLog strings.Builder
	for _, l := range lines {
		runLog.WriteString(l.Text + "\n")
	}
	if !strings.Contains(runLog.String(), "banned: redirected to "+base+"/captcha?from=/p/") {
		t.Errorf("the run's log does not say the redirect was a ban:\n%s", runLog.String())
	}
}
