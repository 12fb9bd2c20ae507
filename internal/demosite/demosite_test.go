package demosite

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/temoto/robotstxt"

	"crawlq/internal/spider"
	"crawlq/internal/urlx"
)

// crawl is a minimal sequential BFS crawler: robots.txt disallow rules, canonical-URL
// dedupe (including redirect targets), and nothing else. It returns items by key.
func crawl(t *testing.T, sp spider.Spider, baseURL string) map[string]spider.Item {
	t.Helper()
	ctx := context.Background()
	args := map[string]string{"base_url": baseURL}
	sp, err := spider.WithArgs(sp, args)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	robotsResp, err := client.Get(baseURL + "/robots.txt")
	if err != nil {
		t.Fatal(err)
	}
	robots, err := robotstxt.FromResponse(robotsResp)
	robotsResp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	group := robots.FindGroup(sp.Settings().UserAgent)

	queue, err := sp.StartRequests(ctx, args)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range queue {
		seen[r.URL] = true
	}
	items := map[string]spider.Item{}
	for len(queue) > 0 {
		req := queue[0]
		queue = queue[1:]
		u, _ := url.Parse(req.URL)
		if !group.Test(u.EscapedPath()) {
			continue
		}
		resp, err := client.Get(req.URL)
		if err != nil {
			t.Fatalf("GET %s: %v", req.URL, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("read %s: %v", req.URL, err)
		}
		final, err := urlx.Canonical(resp.Request.URL.String())
		if err != nil {
			t.Fatal(err)
		}
		if final != req.URL {
			if seen[final] {
				continue
			}
			seen[final] = true
		}
		res, err := spider.ParseWithStats(ctx, sp, &spider.Response{URL: final, Status: resp.StatusCode, Header: resp.Header, Body: body, Depth: req.Depth})
		if err != nil {
			t.Fatalf("parse %s: %v", final, err)
		}
		if res.Stats.Dropped != 0 {
			t.Errorf("%s: %d items dropped", final, res.Stats.Dropped)
		}
		for _, it := range res.Items {
			if _, dup := items[it.Key]; dup {
				t.Errorf("item %s extracted twice", it.Key)
			}
			items[it.Key] = it
		}
		for _, f := range res.Follow {
			if !seen[f.URL] {
				seen[f.URL] = true
				queue = append(queue, f)
			}
		}
	}
	return items
}

func TestDemoSpecCrawlsDemoSite(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../spiders/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := spider.ParseSpec(data, "demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := spider.Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	site := New(Config{SlowDelay: 20 * time.Millisecond})
	srv := httptest.NewServer(site)
	defer srv.Close()
	// httptest serves on 127.0.0.1 like the spec, but use "localhost" so that base_url
	// must really widen the allowed domains.
	base := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)

	items := crawl(t, sp, base)
	exp := site.Expected()
	if exp.Items != 1200 || exp.Listings != 50 || exp.Pages != 1254 {
		t.Fatalf("Expected() = %d items, %d listings, %d pages; want 1200, 50, 1254", exp.Items, exp.Listings, exp.Pages)
	}
	if len(items) != exp.Items {
		t.Errorf("crawl yielded %d items, want %d", len(items), exp.Items)
	}
	it, ok := items["CQ-000007"]
	if !ok {
		t.Fatal("item CQ-000007 (the slow page) missing")
	}
	want := map[string]any{"sku": "CQ-000007", "title": title(7), "price": price(7, 0), "category": category(7),
		"url": base + "/catalogue/item-7.html"}
	if !reflect.DeepEqual(it.Fields, want) {
		t.Errorf("item 7 = %v\nwant %v", it.Fields, want)
	}

	hits := site.Hits()
	if hits[RobotsPath] != 1 {
		t.Errorf("robots.txt fetched %d times", hits[RobotsPath])
	}
	delete(hits, RobotsPath)
	var fetched []string
	for p, n := range hits {
		fetched = append(fetched, p)
		if n != 1 {
			t.Errorf("%s fetched %d times", p, n)
		}
		if strings.HasPrefix(p, PrivatePrefix) {
			t.Errorf("disallowed %s fetched", p)
		}
	}
	sort.Strings(fetched)
	if !reflect.DeepEqual(fetched, exp.Paths) {
		t.Errorf("fetched %d paths, expected %d", len(fetched), len(exp.Paths))
	}
	if got := site.TotalHits(); got != int64(exp.Pages)+1 {
		t.Errorf("TotalHits = %d, want %d", got, exp.Pages+1)
	}
}

func TestSmallSiteAndSpecialPages(t *testing.T) {
	t.Parallel()
	site := New(Config{Items: 5, PerPage: 2, SlowDelay: time.Millisecond})
	exp := site.Expected()
	if exp.Items != 5 || exp.Listings != 3 || exp.Pages != 5+3+4 || exp.Disallowed != 3 {
		t.Fatalf("Expected = %+v", exp)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := site.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr.String()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for path, want := range map[string]int{
		"/": 200, RedirectPath: 301, FeaturedPath: 200, NotFoundPath: 404, "/catalogue/page-3.html": 200,
		"/catalogue/page-4.html": 404, "/catalogue/item-5.html": 200, "/catalogue/item-6.html": 404,
		"/catalogue/item-05.html": 404, "/catalogue/item-99999999999999999999.html": 404, "/private/offer-1.html": 200,
		RobotsPath: 200, "/catalogue/item-.html": 404,
	} {
		resp, err := noRedirect.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
	if site.SlowPath() != "/catalogue/item-5.html" {
		t.Errorf("slow path = %s", site.SlowPath())
	}
	if site.Hits()["/"] != 1 || site.TotalHits() != 13 {
		t.Errorf("hits = %v", site.Hits())
	}
	site.ResetHits()
	if site.TotalHits() != 0 {
		t.Error("ResetHits did not reset")
	}
	for _, bad := range []Config{{Items: -1}, {Items: MaxItems + 1}, {PerPage: -2}, {SlowDelay: -time.Second}} {
		if bad.Validate() == nil {
			t.Errorf("Validate(%+v) = nil", bad)
		}
	}
	if (Config{}).Validate() != nil {
		t.Error("zero Config must be valid")
	}
}
