package demosite

import (
	"compress/gzip"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func get(t *testing.T, url string, h map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// Pages carry validators and answer 304 to them until their generation changes them.
func TestPagesAnswerConditionalRequests(t *testing.T) {
	site := New(Config{Items: 100, SlowDelay: 1, ChangePercent: 100})
	srv := httptest.NewServer(site)
	defer srv.Close()
	for _, p := range []string{"/", "/catalogue/page-1.html", "/catalogue/item-3.html"} {
		r := get(t, srv.URL+p, nil)
		etag, lm := r.Header.Get("ETag"), r.Header.Get("Last-Modified")
		if r.StatusCode != 200 || etag == "" || lm == "" {
			t.Fatalf("%s: status %d ETag %q Last-Modified %q; want 200 with both", p, r.StatusCode, etag, lm)
		}
		if r := get(t, srv.URL+p, map[string]string{"If-None-Match": etag}); r.StatusCode != http.StatusNotModified {
			t.Errorf("%s with If-None-Match: status %d, want 304", p, r.StatusCode)
		}
		if r := get(t, srv.URL+p, map[string]string{"If-Modified-Since": lm}); r.StatusCode != http.StatusNotModified {
			t.Errorf("%s with If-Modified-Since: status %d, want 304", p, r.StatusCode)
		}
	}
	r := get(t, srv.URL+"/catalogue/item-3.html", nil)
	etag := r.Header.Get("ETag")
	site.Advance() // every item changes
	if r := get(t, srv.URL+"/catalogue/item-3.html", map[string]string{"If-None-Match": etag}); r.StatusCode != 200 {
		t.Errorf("a changed item with its old ETag: status %d, want 200", r.StatusCode)
	}
}

// Advance changes and deletes exactly the asked shares, the same ones for the same seed.
func TestAdvanceIsDeterministic(t *testing.T) {
	a := New(Config{Items: 5000, ChangePercent: 5, DeletePercent: 1, Seed: 7})
	b := New(Config{Items: 5000, ChangePercent: 5, DeletePercent: 1, Seed: 7, Generation: 1})
	ch := a.Advance()
	if len(ch.Changed) != 250 || len(ch.Deleted) != 50 {
		t.Fatalf("changed %d, deleted %d; want 250 and 50", len(ch.Changed), len(ch.Deleted))
	}
	if !slices.Equal(ch.Changed, b.LastChanges().Changed) || !slices.Equal(ch.Deleted, b.LastChanges().Deleted) {
		t.Error("the same seed and generation changed other items")
	}
	for _, d := range ch.Deleted {
		if slices.Contains(ch.Changed, d) {
			t.Errorf("%s both changed and deleted", d)
		}
	}
	if a.LiveItems() != 4950 || a.Expected().Items != 4950 {
		t.Errorf("live items %d, expected %d; want 4950", a.LiveItems(), a.Expected().Items)
	}
	srv := httptest.NewServer(a)
	defer srv.Close()
	k := strings.TrimPrefix(ch.Deleted[0], "CQ-")
	k = strings.TrimLeft(k, "0")
	if r := get(t, srv.URL+"/catalogue/item-"+k+".html", nil); r.StatusCode != 404 {
		t.Errorf("deleted item %s: status %d, want 404", k, r.StatusCode)
	}
}

// The sitemap index names gzipped children that list every live item once.
func TestSitemapListsLiveItems(t *testing.T) {
	site := New(Config{Items: 2500, SitemapSize: 1000, DeletePercent: 1})
	site.Advance()
	srv := httptest.NewServer(site)
	defer srv.Close()
	robots, _ := io.ReadAll(get(t, srv.URL+RobotsPath, nil).Body)
	if !strings.Contains(string(robots), "Sitemap: "+srv.URL+SitemapPath) {
		t.Fatalf("robots.txt names no sitemap:\n%s", robots)
	}
	var idx sitemapIndex
	if err := xml.NewDecoder(get(t, srv.URL+SitemapPath, nil).Body).Decode(&idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Sitemaps) != 4 {
		t.Fatalf("index lists %d children, want 4 (pages + 3 of items)", len(idx.Sitemaps))
	}
	items := map[string]bool{}
	for _, c := range idx.Sitemaps {
		zr, err := gzip.NewReader(get(t, c.Loc, nil).Body)
		if err != nil {
			t.Fatalf("%s: %v", c.Loc, err)
		}
		var set urlSet
		if err := xml.NewDecoder(zr).Decode(&set); err != nil {
			t.Fatal(err)
		}
		for _, u := range set.URLs {
			if u.LastMod == "" {
				t.Errorf("%s has no lastmod", u.Loc)
			}
			if strings.Contains(u.Loc, "/item-") {
				items[u.Loc] = true
			}
		}
	}
	if len(items) != 2475 {
		t.Errorf("sitemap lists %d items, want the 2475 live", len(items))
	}
}
