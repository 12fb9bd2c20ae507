package demosite

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"strings"
)

// The site's script-drawn section, for spiders that render pages (render: browser) and for
// measuring what a rendered page costs: JSPrefix+"page-N.html" lists the catalogue's listing page
// N with plain links (so a plain fetch reaches the same pages), and each JSPrefix+"item-K.html"
// is an empty shell whose script fetches JSPrefix+"api/item-K.json" and draws the product from it
// (div.product with the catalogue's title, price, SKU and category): a plain fetch of it finds no
// item. JSPrefix+"lazy.html" is a list that loads 20 more items each time its end comes into
// view, to the catalogue's end. Nothing else of the site links to the section, so the demo
// spider's crawl and Expected are unchanged.

// JSPrefix starts the paths of the script-drawn section.
const JSPrefix = "/js/"

// JSStart is the section's first listing page.
const JSStart = JSPrefix + "page-1.html"

// JSSpec is a spider spec (named name, base URL http://127.0.0.1: schedule it with base_url)
// that crawls the section: its listings fetched plainly, and its item pages, rendered when render
// (a follow rule's render: browser, waiting for div.product) or fetched plainly too (no item).
func JSSpec(name string, render bool) string {
	rule := "  - css: a.item\n"
	wait := ""
	if render {
		rule += "    render: browser\n"
		wait = "wait_for: div.product\n"
	}
	return `name: ` + name + `
start_urls: [http://127.0.0.1` + JSStart + `]
concurrency: 32
follow:
` + rule + `  - css: li.next a
items:
  - css: div.product
    key: sku
    fields:
      sku: {css: span.sku, required: true}
      title: {css: h1.title, required: true}
      price: {css: p.price, required: true}
` + wait
}

// JSExpected is what a crawl from JSStart that follows the listing and item links and renders
// the pages yields: every live item once, from Listings listing pages and Items item pages. A
// plain fetch of the same pages yields no item.
func (s *Site) JSExpected() Expected {
	var e Expected
	e.Listings = s.listings
	for k := 1; k <= s.cfg.Items; k++ {
		if s.live(k) {
			e.Items++
		}
	}
	e.Pages = e.Listings + e.Items
	return e
}

// js serves the section; it reports false for a path it does not know.
func (s *Site) js(w http.ResponseWriter, r *http.Request, path string) bool {
	switch {
	case path == JSPrefix+"lazy.html":
		s.serve(w, r, page("Everything", lazyList), s.modTime(0))
	case path == JSPrefix+"api/lazy.json":
		var from int
		fmt.Sscan(r.URL.Query().Get("from"), &from)
		var out []jsItem
		for k := max(from, 1); k <= s.cfg.Items && len(out) < 20; k++ {
			out = append(out, s.jsItem(k))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	default:
		if n, ok := number(path, JSPrefix+"page-", ".html"); ok && n <= s.listings {
			s.serve(w, r, s.jsListing(n), s.modTime(0))
			return true
		}
		if k, ok := number(path, JSPrefix+"item-", ".html"); ok && k <= s.cfg.Items && s.live(k) {
			s.serve(w, r, page(fmt.Sprintf("Item %d", k), fmt.Sprintf(jsItemShell, k)), s.modTime(0))
			return true
		}
		if k, ok := number(path, JSPrefix+"api/item-", ".json"); ok && k <= s.cfg.Items && s.live(k) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(s.jsItem(k))
			return true
		}
		return false
	}
	return true
}

// jsItem is an item as the section's scripts receive it.
type jsItem struct {
	Title    string `json:"title"`
	Price    string `json:"price"`
	SKU      string `json:"sku"`
	Category string `json:"category"`
}

func (s *Site) jsItem(k int) jsItem {
	s.mu.Lock()
	rev := int(s.gen.rev[k-1])
	s.mu.Unlock()
	return jsItem{Title: title(k), Price: price(k, rev), SKU: sku(k), Category: category(k)}
}

// jsListing is listing page n of the section: plain links to its live items and the next page.
func (s *Site) jsListing(n int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `<h1>Catalogue (drawn by scripts), page %d of %d</h1><ol class="row">`, n, s.listings)
	for k := (n-1)*s.cfg.PerPage + 1; k <= min(n*s.cfg.PerPage, s.cfg.Items); k++ {
		if s.live(k) {
			fmt.Fprintf(&b, `<li><a class="item" href="item-%d.html">%s</a></li>`, k, html.EscapeString(title(k)))
		}
	}
	b.WriteString(`</ol><ul class="pager">`)
	if n < s.listings {
		fmt.Fprintf(&b, `<li class="next"><a href="page-%d.html">next</a></li>`, n+1)
	}
	b.WriteString(`</ul>`)
	return page(fmt.Sprintf("Catalogue page %d", n), b.String())
}

// jsItemShell is an item page before its script runs: %d is the item.
const jsItemShell = `<div id="root">Loading…</div>
<script>
fetch("api/item-%d.json").then(function (r) { return r.json(); }).then(function (it) {
  var d = document.createElement("div");
  d.className = "product";
  d.innerHTML = '<h1 class="title"></h1><p class="price"></p><p>SKU <span class="sku"></span></p><p>Category <span class="category"></span></p>';
  d.querySelector(".title").textContent = it.title;
  d.querySelector(".price").textContent = it.price;
  d.querySelector(".sku").textContent = it.sku;
  d.querySelector(".category").textContent = it.category;
  document.getElementById("root").replaceWith(d);
});
</script>`

// lazyList draws 20 items at a time from api/lazy.json as its end comes into view.
const lazyList = `<h1>Everything</h1><ol id="list"></ol><div id="end" style="height:10px"></div>
<script>
var next = 1, busy = false, done = false;
function more() {
  if (busy || done) return;
  busy = true;
  fetch("api/lazy.json?from=" + next).then(function (r) { return r.json(); }).then(function (items) {
    if (!items || items.length === 0) { done = true; return; }
    items.forEach(function (it) {
      var li = document.createElement("li");
      li.className = "product";
      li.style.height = "40px";
      li.innerHTML = '<span class="title"></span> <span class="sku"></span>';
      li.querySelector(".title").textContent = it.title;
      li.querySelector(".sku").textContent = it.sku;
      document.getElementById("list").appendChild(li);
    });
    next += items.length;
  }).finally(function () { busy = false; });
}
new IntersectionObserver(function (es) { if (es[0].isIntersecting) more(); }).observe(document.getElementById("end"));
</script>`
