// Package demosite owns the demo site: a deterministic synthetic catalogue that
// `crawlq demo-site` serves and spiders/demo.yaml crawls. It is built to exercise a
// crawler's corners (duplicate links, a redirect, a 404, a robots.txt-disallowed
// section, a slow page, off-site and non-http links) while stating exactly what a
// correct crawl yields (Expected) and counting what was actually fetched (Hits).
package demosite

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
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
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Items <= 0 {
		c.Items = 1200
	}
	if c.Items > MaxItems {
		c.Items = MaxItems
	}
	if c.PerPage <= 0 {
		c.PerPage = 24
	}
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
}

// New returns a site; zero or out-of-range Config fields take their defaults (call
// Config.Validate first to reject bad input instead).
func New(cfg Config) *Site {
	cfg = cfg.withDefaults()
	s := &Site{cfg: cfg, hits: map[string]int64{}, markup: cfg.Markup}
	s.listings = (cfg.Items + cfg.PerPage - 1) / cfg.PerPage
	s.slowItem = min(7, cfg.Items)
	return s
}

// Config returns the configuration in effect, defaults filled in.
func (s *Site) Config() Config { return s.cfg }

// Expected states what a correct crawl yields.
func (s *Site) Expected() Expected {
	paths := []string{"/", RedirectPath, FeaturedPath, NotFoundPath}
	for n := 1; n <= s.listings; n++ {
		paths = append(paths, listingPath(n))
	}
	for k := 1; k <= s.cfg.Items; k++ {
		paths = append(paths, itemPath(k))
	}
	sort.Strings(paths)
	return Expected{
		Items: s.cfg.Items, Pages: len(paths), Listings: s.listings,
		Redirects: 1, NotFound: 1, Disallowed: s.listings, Paths: paths,
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

// ServeHTTP serves the catalogue.
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
		fmt.Fprint(w, "User-agent: *\nDisallow: "+PrivatePrefix+"\n")
	case path == "/":
		s.home(w)
	case path == RedirectPath:
		http.Redirect(w, r, FeaturedPath, http.StatusMovedPermanently)
	case path == FeaturedPath:
		s.featured(w)
	case strings.HasPrefix(path, PrivatePrefix):
		page(w, "Private", `<h1>Members only</h1><p>A crawler that obeys robots.txt never sees this.</p>`)
	default:
		if n, ok := number(path, "/catalogue/page-", ".html"); ok && n <= s.listings {
			s.listing(w, r, n)
			return
		}
		if k, ok := number(path, "/catalogue/item-", ".html"); ok && k <= s.cfg.Items {
			if k == s.slowItem {
				t := time.NewTimer(s.cfg.SlowDelay)
				select {
				case <-t.C:
				case <-r.Context().Done():
					t.Stop()
					return
				}
			}
			s.item(w, k, s.Markup())
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, "<!doctype html><html><head><title>Not found</title></head><body><h1>404</h1><a href=\"/\">Home</a></body></html>")
	}
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

func page(w http.ResponseWriter, title, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>%s | crawlq demo</title></head>\n<body>\n%s\n</body></html>\n",
		html.EscapeString(title), body)
}

func (s *Site) home(w http.ResponseWriter) {
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
	page(w, "Home", b.String())
}

func (s *Site) featured(w http.ResponseWriter) {
	var b strings.Builder
	b.WriteString(`<h1>Featured</h1><ul>`)
	for k := 1; k <= min(featuredCount, s.cfg.Items); k++ {
		fmt.Fprintf(&b, `<li><a href="item-%d.html">%s</a></li>`, k, html.EscapeString(title(k)))
	}
	b.WriteString(`</ul><a href="/">Home</a>`)
	page(w, "Featured", b.String())
}

func (s *Site) listing(w http.ResponseWriter, r *http.Request, n int) {
	var b strings.Builder
	fmt.Fprintf(&b, `<h1>Catalogue, page %d of %d</h1><a href="/">Home</a><ol class="row">`, n, s.listings)
	first := (n-1)*s.cfg.PerPage + 1
	last := min(n*s.cfg.PerPage, s.cfg.Items)
	for k := first; k <= last; k++ {
		// Each item is linked twice, the second time with dot segments and a fragment.
		fmt.Fprintf(&b, `<li><article class="product_pod"><a href="item-%d.html"><img src="/static/%d.png" alt=""></a>`+
			`<h3><a href="../catalogue/./item-%d.html#reviews">%s</a></h3><p class="price_color">%s</p></article></li>`,
			k, k, k, html.EscapeString(title(k)), price(k))
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
	page(w, fmt.Sprintf("Catalogue page %d", n), b.String())
}

func (s *Site) item(w http.ResponseWriter, k int, markup string) {
	var b strings.Builder
	if !itemMarkup(&b, k, markup) {
		fmt.Fprintf(&b, `<div class="product"><h1 class="title">%s</h1><p class="price">%s</p>`+
			`<p>SKU <span class="sku">%s</span></p><p>Category <span class="category">%s</span></p>`+
			`<a class="permalink" href="item-%d.html">permalink</a></div>`,
			html.EscapeString(title(k)), price(k), sku(k), category(k), k)
	}
	b.WriteString(`<h2>Related</h2><ul class="related">`)
	for _, r := range []int{k%s.cfg.Items + 1, (k+1)%s.cfg.Items + 1} {
		fmt.Fprintf(&b, `<li><a href="item-%d.html">%s</a></li>`, r, html.EscapeString(title(r)))
	}
	listing := (k-1)/s.cfg.PerPage + 1
	fmt.Fprintf(&b, `</ul><a href="page-%d.html">Back to the listing</a> <a href="/">Home</a>`, listing)
	page(w, title(k), b.String())
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
func price(k int) string    { return fmt.Sprintf("£%d.%02d", 3+(k*37)%190, (k*53)%100) }
func sku(k int) string      { return fmt.Sprintf("CQ-%06d", k) }
func category(k int) string { return categories[(k*7)%len(categories)] }
