// Package demosite owns the demo site: a deterministic synthetic catalogue that
// `crawlq demo-site` serves and spiders/demo.yaml crawls. It is built to exercise a
// crawler's corners (duplicate links, a redirect, a 404, a robots.txt-disallowed
// section, a slow page, off-site and non-http links) while stating exactly what a
// correct crawl yields (Expected) and counting what was actually fetched (Hits).
package demosite

import (
	"bytes"
	"context"
	"crawlq/internal/clock"
	"errors"
	"fmt"
	"hash/fnv"
	"html"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config shapes the catalogue.
type Config struct {
	Items     int           // item pages (each one item); default 1200, at most 1,000,000
	PerPage   int           // items per listing page; default 24
	SlowDelay time.Duration // how long the slow page (item 7, or the last item if fewer) sleeps; default 300ms
	// Markup is how item pages are marked up: "" (default, what spiders/demo.yaml expects),
	// MarkupRedesign or MarkupNoCategory (markup.go). Site.SetMarkup changes it while serving.
	Markup string
	// ChangePercent and DeletePercent are the shares of the live items (0..100 each) that each
	// generation (Site.Advance) changes (a new price) and deletes (404 and gone from the listings
	// and the sitemap); default 0. Which ones is decided by Seed and the generation number, so a
	// site advanced to generation N is the same catalogue every time (generation.go).
	ChangePercent int
	DeletePercent int
	Seed          int64
	// Generation is the generation the site starts at (Advance applied that many times); default 0.
	Generation int
	// SitemapSize is how many URLs each gzipped child of the sitemap index lists; default 1000.
	SitemapSize int
	// Clock tells when each generation began (the pages' Last-Modified). Default the wall clock.
	Clock clock.Clock
}

// MaxItems bounds Config.Items.
const MaxItems = 1_000_000

// Validate names the first bad field. Zero values mean their defaults.
func (c Config) Validate() error {
	switch {
	case c.Items < 0 || c.Items > MaxItems:
		return fmt.Errorf("demosite config: Items %d out of range 1..%d", c.Items, MaxItems)
	case c.PerPage < 0:
		return fmt.Errorf("demosite config: PerPage %d is negative", c.PerPage)
	case c.SlowDelay < 0:
		return fmt.Errorf("demosite config: SlowDelay %s is negative", c.SlowDelay)
	case !validMarkup(c.Markup):
		return fmt.Errorf("demosite config: Markup %q: want one of %q", c.Markup, Markups())
	case c.ChangePercent < 0 || c.ChangePercent > 100:
		return fmt.Errorf("demosite config: ChangePercent %d out of range 0..100", c.ChangePercent)
	case c.DeletePercent < 0 || c.DeletePercent > 100:
		return fmt.Errorf("demosite config: DeletePercent %d out of range 0..100", c.DeletePercent)
	case c.Generation < 0 || c.Generation > maxGeneration:
		return fmt.Errorf("demosite config: Generation %d out of range 0..%d", c.Generation, maxGeneration)
	case c.SitemapSize < 0 || c.SitemapSize > 50000:
		return fmt.Errorf("demosite config: SitemapSize %d out of range 1..50000", c.SitemapSize)
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.Clock = clock.Or(c.Clock)
	if c.Items <= 0 {
		c.Items = 1200
	}
	if c.Items > MaxItems {
		c.Items = MaxItems
	}
	if c.PerPage <= 0 {
		c.PerPage = 24
	}
	if c.SitemapSize <= 0 || c.SitemapSize > 50000 {
		c.SitemapSize = 1000
	}
	c.ChangePercent = min(max(c.ChangePercent, 0), 100)
	c.DeletePercent = min(max(c.DeletePercent, 0), 100)
	c.Generation = min(max(c.Generation, 0), maxGeneration)
	if c.SlowDelay < 0 {
		c.SlowDelay = 0
	} else if c.SlowDelay == 0 {
		c.SlowDelay = 300 * time.Millisecond
	}
	return c
}

// Paths of the site's special pages.
const (
	RobotsPath     = "/robots.txt"
	RedirectPath   = "/catalogue/old-featured.html" // 301 to FeaturedPath, linked from home
	FeaturedPath   = "/catalogue/featured.html"     // reachable only through the redirect
	NotFoundPath   = "/catalogue/missing.html"      // linked from home, answers 404
	PrivatePrefix  = "/private/"                    // disallowed by robots.txt, linked from every listing
	ExternalURL    = "http://example.com/"          // off-site link on the home page
	featuredCount  = 5
	maxTrackedPath = 100_000
)

// Expected is what a correct crawl from "/" that follows every on-site link, obeys
// robots.txt and deduplicates canonical URLs yields.
type Expected struct {
	Items      int      // distinct items (SKUs), one per item page
	Pages      int      // distinct URLs fetched, robots.txt excluded: home, listings, items, redirect, its target, the 404
	Listings   int      // listing pages
	Redirects  int      // URLs answering a redirect (1)
	NotFound   int      // linked URLs answering 404 (1)
	Disallowed int      // distinct linked URLs under /private/ (never fetched)
	Paths      []string // every path fetched, sorted; each exactly once
}

// Site is the demo site, an http.Handler. Safe for concurrent use.
type Site struct {
	cfg      Config
	listings int
	slowItem int

	mu     sync.Mutex
	hits   map[string]int64
	markup string
	gen    generations // guarded by mu
}

// New returns a site; zero or out-of-range Config fields take their defaults (call
// Config.Validate first to reject bad input instead).
func New(cfg Config) *Site {
	cfg = cfg.withDefaults()
	s := &Site{cfg: cfg, hits: map[string]int64{}, markup: cfg.Markup}
	s.listings = (cfg.Items + cfg.PerPage - 1) / cfg.PerPage
	s.slowItem = min(7, cfg.Items)
	s.gen = newGenerations(cfg.Items, cfg.Clock.Now())
	for range cfg.Generation {
		s.advance()
	}
	return s
}

// Config returns the configuration in effect, defaults filled in.
func (s *Site) Config() Config { return s.cfg }

// Expected states what a correct crawl yields. Deleted items (generation.go) are not listed; one
// still linked (from the home page, the featured page or a live item's related links) is fetched
// and answers 404.
func (s *Site) Expected() Expected {
	paths := []string{"/", RedirectPath, FeaturedPath, NotFoundPath}
	for n := 1; n <= s.listings; n++ {
		paths = append(paths, listingPath(n))
	}
	s.mu.Lock()
	deleted := slices.Clone(s.gen.deleted)
	s.mu.Unlock()
	linked := map[int]bool{1: true}
	for k := 1; k <= min(featuredCount, s.cfg.Items); k++ {
		linked[k] = true
	}
	items, gone := 0, 0
	for k := 1; k <= s.cfg.Items; k++ {
		if !deleted[k-1] {
			items++
			linked[k%s.cfg.Items+1], linked[(k+1)%s.cfg.Items+1] = true, true
		}
	}
	for k := 1; k <= s.cfg.Items; k++ {
		if !deleted[k-1] || linked[k] {
			paths = append(paths, itemPath(k))
		}
		if deleted[k-1] && linked[k] {
			gone++
		}
	}
	sort.Strings(paths)
	return Expected{
		Items: items, Pages: len(paths), Listings: s.listings,
		Redirects: 1, NotFound: 1 + gone, Disallowed: s.listings, Paths: paths,
	}
}

// SlowPath is the page that sleeps SlowDelay before answering.
func (s *Site) SlowPath() string { return itemPath(s.slowItem) }

// Hits returns the number of requests per path so far, robots.txt included.
func (s *Site) Hits() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.hits))
	for k, v := range s.hits {
		out[k] = v
	}
	return out
}

// TotalHits returns the number of requests so far, robots.txt included.
func (s *Site) TotalHits() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, v := range s.hits {
		n += v
	}
	return n
}

// ResetHits forgets every request counted so far.
func (s *Site) ResetHits() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hits = map[string]int64{}
}

func (s *Site) count(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A scanner hitting random paths must not grow the map without bound.
	if _, ok := s.hits[path]; !ok && len(s.hits) >= maxTrackedPath {
		path = "(other)"
	}
	s.hits[path]++
}

// Serve listens on addr and serves the site until ctx is done. It returns the address
// actually bound (addr may use port 0).
func (s *Site) Serve(ctx context.Context, addr string) (net.Addr, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen demo site: %w", err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = ln.Close()
		}
	}()
	return ln.Addr(), nil
}

func listingPath(n int) string { return "/catalogue/page-" + strconv.Itoa(n) + ".html" }
func itemPath(k int) string    { return "/catalogue/item-" + strconv.Itoa(k) + ".html" }

// ServeHTTP serves the catalogue. Its pages carry an ETag (a hash of the page) and a
// Last-Modified (the generation that last changed them, generation.go) and answer 304 to a
// request whose If-None-Match or If-Modified-Since they match (http.ServeContent).
func (s *Site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	s.count(path)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch {
	case path == RobotsPath:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "User-agent: *\nDisallow: "+PrivatePrefix+"\nSitemap: "+origin(r)+SitemapPath+"\n")
	case path == SitemapPath || strings.HasPrefix(path, sitemapDir):
		s.sitemap(w, r)
	case path == "/":
		s.serve(w, r, s.home(), s.modTime(0))
	case path == RedirectPath:
		http.Redirect(w, r, FeaturedPath, http.StatusMovedPermanently)
	case path == FeaturedPath:
		s.serve(w, r, s.featured(), s.modTime(0))
	case strings.HasPrefix(path, JSPrefix) && s.js(w, r, path):
	case strings.HasPrefix(path, PrivatePrefix):
		s.serve(w, r, page("Private", `<h1>Members only</h1><p>A crawler that obeys robots.txt never sees this.</p>`), s.modTime(0))
	default:
		if n, ok := number(path, "/catalogue/page-", ".html"); ok && n <= s.listings {
			body, gen := s.listing(r, n)
			s.serve(w, r, body, s.modTime(gen))
			return
		}
		if k, ok := number(path, "/catalogue/item-", ".html"); ok && k <= s.cfg.Items && s.live(k) {
			if k == s.slowItem {
				t := time.NewTimer(s.cfg.SlowDelay)
				select {
				case <-t.C:
				case <-r.Context().Done():
					t.Stop()
					return
				}
			}
			body, gen := s.item(k, s.Markup())
			s.serve(w, r, body, s.modTime(gen))
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, "<!doctype html><html><head><title>Not found</title></head><body><h1>404</h1><a href=\"/\">Home</a></body></html>")
	}
}

// serve answers with an HTML page and its validators: http.ServeContent answers the
// conditional requests (304) and HEAD.
func (s *Site) serve(w http.ResponseWriter, r *http.Request, body []byte, mod time.Time) {
	h := fnv.New64a()
	h.Write(body)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("ETag", fmt.Sprintf(`"%016x"`, h.Sum64()))
	http.ServeContent(w, r, "", mod, bytes.NewReader(body))
}

// origin is the scheme and host the request reached the site at.
func origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// number parses the N in prefix+N+suffix; N must be canonical decimal and >= 1.
func number(path, prefix, suffix string) (int, bool) {
	if !strings.HasPrefix(path, prefix) || !strings.HasSuffix(path, suffix) || len(path) <= len(prefix)+len(suffix) {
		return 0, false
	}
	digits := path[len(prefix) : len(path)-len(suffix)]
	if len(digits) > 7 || digits[0] == '0' {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 {
		return 0, false
	}
	return n, true
}

func page(title, body string) []byte {
	return fmt.Appendf(nil, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>%s | crawlq demo</title></head>\n<body>\n%s\n</body></html>\n",
		html.EscapeString(title), body)
}

func (s *Site) home() []byte {
	var b strings.Builder
	b.WriteString(`<h1>crawlq demo catalogue</h1><nav><ul>`)
	b.WriteString(`<li><a href="/catalogue/page-1.html">Browse the catalogue</a></li>`)
	if s.listings > 1 {
		b.WriteString(`<li><a href="catalogue/page-2.html">Page two</a></li>`)
	}
	fmt.Fprintf(&b, `<li><a href="%s">Featured (moved)</a></li>`, RedirectPath)
	fmt.Fprintf(&b, `<li><a href="%s">A page that is gone</a></li>`, NotFoundPath)
	b.WriteString(`<li><a href="/catalogue/item-1.html#top">Our first item</a></li>`)
	fmt.Fprintf(&b, `<li><a href="%s">Somewhere else</a></li>`, ExternalURL)
	b.WriteString(`<li><a href="mailto:shop@example.com">Mail us</a></li><li><a href="javascript:void(0)">Do nothing</a></li>`)
	b.WriteString(`</ul></nav>`)
	return page("Home", b.String())
}

func (s *Site) featured() []byte {
	var b strings.Builder
	b.WriteString(`<h1>Featured</h1><ul>`)
	for k := 1; k <= min(featuredCount, s.cfg.Items); k++ {
		fmt.Fprintf(&b, `<li><a href="item-%d.html">%s</a></li>`, k, html.EscapeString(title(k)))
	}
	b.WriteString(`</ul><a href="/">Home</a>`)
	return page("Featured", b.String())
}

// listing returns listing page n and the generation that last changed it: its live items are
// listed, with their current prices.
func (s *Site) listing(r *http.Request, n int) ([]byte, int) {
	var b strings.Builder
	s.mu.Lock()
	defer s.mu.Unlock()
	gen := 0
	fmt.Fprintf(&b, `<h1>Catalogue, page %d of %d</h1><a href="/">Home</a><ol class="row">`, n, s.listings)
	first := (n-1)*s.cfg.PerPage + 1
	last := min(n*s.cfg.PerPage, s.cfg.Items)
	for k := first; k <= last; k++ {
		gen = max(gen, s.gen.changed[k-1])
		if s.gen.deleted[k-1] {
			continue
		}
		// Each item is linked twice, the second time with dot segments and a fragment.
		fmt.Fprintf(&b, `<li><article class="product_pod"><a href="item-%d.html"><img src="/static/%d.png" alt=""></a>`+
			`<h3><a href="../catalogue/./item-%d.html#reviews">%s</a></h3><p class="price_color">%s</p></article></li>`,
			k, k, k, html.EscapeString(title(k)), price(k, int(s.gen.rev[k-1])))
	}
	b.WriteString(`</ol><ul class="pager">`)
	if n > 1 {
		fmt.Fprintf(&b, `<li class="previous"><a href="page-%d.html">previous</a></li>`, n-1)
	}
	if n < s.listings {
		fmt.Fprintf(&b, `<li class="next"><a href="page-%d.html">next</a></li>`, n+1)
	}
	b.WriteString(`<li><a href="/catalogue/page-1.html">first</a></li></ul>`)
	// An absolute self link with an upper-case scheme and explicit default-free host:
	// canonicalisation must fold it onto this page.
	fmt.Fprintf(&b, `<a href="HTTP://%s/catalogue/page-%d.html">permalink</a>`, html.EscapeString(r.Host), n)
	fmt.Fprintf(&b, `<p><a href="%soffer-%d.html">Members' offer</a></p>`, PrivatePrefix, n)
	return page(fmt.Sprintf("Catalogue page %d", n), b.String()), gen
}

// item returns item page k and the generation that last changed it.
func (s *Site) item(k int, markup string) ([]byte, int) {
	var b strings.Builder
	s.mu.Lock()
	rev, gen := int(s.gen.rev[k-1]), s.gen.changed[k-1]
	s.mu.Unlock()
	if !itemMarkup(&b, k, markup, rev) {
		fmt.Fprintf(&b, `<div class="product"><h1 class="title">%s</h1><p class="price">%s</p>`+
			`<p>SKU <span class="sku">%s</span></p><p>Category <span class="category">%s</span></p>`+
			`<a class="permalink" href="item-%d.html">permalink</a></div>`,
			html.EscapeString(title(k)), price(k, rev), sku(k), category(k), k)
	}
	b.WriteString(`<h2>Related</h2><ul class="related">`)
	for _, r := range []int{k%s.cfg.Items + 1, (k+1)%s.cfg.Items + 1} {
		fmt.Fprintf(&b, `<li><a href="item-%d.html">%s</a></li>`, r, html.EscapeString(title(r)))
	}
	listing := (k-1)/s.cfg.PerPage + 1
	fmt.Fprintf(&b, `</ul><a href="page-%d.html">Back to the listing</a> <a href="/">Home</a>`, listing)
	return page(title(k), b.String()), gen
}

var (
	adjectives = []string{"Blue", "Sturdy", "Tiny", "Vintage", "Shiny", "Quiet", "Folding", "Smart", "Rustic", "Electric", "Woolly"}
	nouns      = []string{"Widget", "Lamp", "Kettle", "Chair", "Notebook", "Backpack", "Clock", "Teapot", "Scarf", "Bicycle bell", "Radio", "Mug", "Umbrella"}
	categories = []string{"Home", "Garden", "Books", "Travel", "Kitchen", "Office", "Outdoors", "Gifts"}
)

// The catalogue is a pure function of the item number, so every run of the site (and
// every test) sees the same data.
func title(k int) string {
	return fmt.Sprintf("%s %s No. %d", adjectives[k%len(adjectives)], nouns[(k/len(adjectives))%len(nouns)], k)
}

// price is item k's price after rev changes (generation.go).
func price(k, rev int) string {
	return fmt.Sprintf("£%d.%02d", 3+(k*37)%190+rev, (k*53)%100)
}
func sku(k int) string      { return fmt.Sprintf("CQ-%06d", k) }
func category(k int) string { return categories[(k*7)%len(categories)] }
