package spider

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"crawlq/internal/demosite"
	"crawlq/internal/urlx"
)

// A spec that uses every construct of the streaming subset: child and descendant
// combinators, attribute tests, a container-less rule (the document), container text and
// attributes (no field css), nested containers, and a follow rule whose matches hold links.
const subsetSpec = `
name: subset
start_urls: ["http://example.com/"]
follow:
  - css: "nav, ul > li, a.self, [data-next]"
  - css: "div#main a[href]"
  - pattern: "/f"
items:
  - css: "div.product, section [itemtype~=Product]"
    key: sku
    fields:
      sku: {css: "span.sku", required: true}
      title: {css: "* > h1"}
      whole: {}
      kind: {attr: class}
      link: {css: "a[rel=self]", attr: href}
      img: {css: "img", attr: src}
  - key: title
    fields:
      title: {css: "head > title", required: true}
      body: {css: body}
      doc: {}
      lang: {css: html, attr: lang}
  - css: "li"
    key: text
    fields:
      text: {}
      pre: {css: pre}
`

// bothPaths parses resp with the streaming path and with the DOM, fails the test when they
// differ, and reports whether the streaming path took the page.
func bothPaths(t *testing.T, sp Spider, resp *Response) bool {
	t.Helper()
	d := sp.(*declarative)
	if d.stream == nil {
		t.Fatalf("spider %s: no streaming plan", d.name)
	}
	dom := *d
	dom.domOnly = true
	want, wantErr := dom.ParseStats(context.Background(), resp)
	got, gotErr := d.ParseStats(context.Background(), resp)
	if (wantErr == nil) != (gotErr == nil) || !reflect.DeepEqual(got, want) {
		t.Fatalf("spider %s, page %s:\n%.2000s\nstream: %+v, %v\ndom:    %+v, %v", d.name, resp.URL, resp.Body, got, gotErr, want, wantErr)
	}
	for _, r := range got.Follow {
		if h := hostOf(r.URL); h != urlx.Hostname(r.URL) {
			t.Fatalf("hostOf(%q) = %q, urlx.Hostname says %q", r.URL, h, urlx.Hostname(r.URL))
		}
	}
	_, ok := d.stream.extract(resp.Body, make([]bool, len(d.items)))
	return ok
}

func shippedSpider(t *testing.T, file string, args map[string]string) Spider {
	t.Helper()
	data, err := os.ReadFile("../../spiders/" + file)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := WithArgs(mustSpider(t, string(data)), args)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// The demo site, crawled in-process page by page: every page parses the same on both
// paths, and every page takes the streaming path.
func TestStreamMatchesDOMOnDemoSite(t *testing.T) {
	t.Parallel()
	site := demosite.New(demosite.Config{Items: 60, PerPage: 7, SlowDelay: time.Nanosecond})
	const base = "http://127.0.0.1:8088"
	specs := []Spider{shippedSpider(t, "demo.yaml", map[string]string{"base_url": base}), mustSpider(t, subsetSpec)}
	queue, seen := []string{base + "/"}, map[string]bool{base + "/": true}
	pages := 0
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		rec := httptest.NewRecorder()
		site.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u, nil))
		if rec.Code != http.StatusOK {
			continue
		}
		pages++
		resp := &Response{URL: u, Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes(), Depth: 1}
		for _, sp := range specs {
			if !bothPaths(t, sp, resp) {
				t.Errorf("%s: demo page %s took the DOM path", sp.Name(), u)
			}
		}
		_, follow, err := specs[0].Parse(context.Background(), resp)
		if err != nil {
			t.Fatalf("parse %s: %v", u, err)
		}
		for _, r := range follow {
			if strings.HasPrefix(r.URL, base) && !seen[r.URL] {
				seen[r.URL] = true
				queue = append(queue, r.URL)
			}
		}
	}
	if pages < 60 {
		t.Fatalf("crawled %d demo pages, want every item and listing", pages)
	}
}

// benchPage renders a page of ../shared/bench/site (its format strings, copied).
func benchPage(title, body string) []byte {
	return []byte(fmt.Sprintf("<!doctype html><html><head><title>%s</title></head><body>%s</body></html>", title, body))
}

func TestStreamMatchesDOMOnBenchSite(t *testing.T) {
	t.Parallel()
	specs := []Spider{shippedSpider(t, "benchsite.yaml", map[string]string{"base_url": "http://127.0.0.1:9000"}), mustSpider(t, subsetSpec)}
	var list strings.Builder
	fmt.Fprintf(&list, "<h1>Listing %d</h1><ul>", 3)
	for i := 41; i <= 60; i++ {
		fmt.Fprintf(&list, `<li><a class="item" href="/item/%d">Item %d</a></li>`, i, i)
	}
	list.WriteString(`</ul><a class="next" href="/list/4">Next</a>`)
	n := 42
	pages := map[string][]byte{
		"/":       benchPage("Catalogue", `<h1>Catalogue</h1><a class="next" href="/list/1">Browse</a>`),
		"/list/3": benchPage("Listing 3", list.String()),
		"/item/42": benchPage(fmt.Sprintf("Item %d", n), fmt.Sprintf(
			`<div class="product"><h1 class="title">Item %d</h1><p class="price">%d.%02d</p><p class="desc">%s</p><a href="/list/1">Back</a></div>`,
			n, n%97+1, n%100, strings.Repeat("Lorem ipsum dolor sit amet. ", 20))),
	}
	for path, body := range pages {
		for _, sp := range specs {
			resp := &Response{URL: "http://127.0.0.1:9000" + path, Status: 200, Body: body, Depth: 1,
				Header: http.Header{"Content-Type": {"text/html; charset=utf-8"}}}
			if !bothPaths(t, sp, resp) {
				t.Errorf("%s: bench page %s took the DOM path", sp.Name(), path)
			}
		}
	}
}

// hostilePages are pages where tree construction is not the plain nesting of the tags, or
// that probe the edges of the tokenizer; each must parse the same on both paths (most of them
// by the stream giving up).
var hostilePages = []string{
	"",
	"plain text, no tags",
	"  \n <!-- c --> <!doctype html> text",
	`<div class="product"><span class="sku">S1</span><p class="price">1<div>block in p</div></p></div>`,
	`<p>one<p>two<ul><li>a<li>b</ul>`,
	`<ul><li>a<ul><li>nested</li></ul></li><li>b</li></ul>`,
	`<dl><dt>t<dd>d<dt>t2</dl>`,
	`<a href="/1">one<a href="/2">two</a></a>`,
	`<b><i>misnested</b></i><a href="/x">x</a>`,
	`<b>1<b>2<b>3<b>4<b>5</b></b></b></b></b><a href=/y>y</a>`,
	`<table><tr><td><a href="/t">cell</a></td></tr><a href="/fostered">f</a></table>`,
	`<form><form><input name=a></form></form><a href="/f">f</a>`,
	`<svg><a xlink:href="/svg" href="/svg2">s</a><title>t</title></svg><math><mi>x</mi></math>`,
	`<template><a href="/tpl">t</a></template><noscript><a href="/ns">n</a></noscript>`,
	`<pre>
first line dropped</pre><pre><!--c-->
kept</pre><listing>
l</listing><li>x<pre>

two</pre></li>`,
	"<pre>\r\nx</pre><li>a\r\nb\rc</li>",
	`<div class="product" class="other"><span class="sku" id=a id=b>S</span><a rel=self rel=x href="/1" href="/2">l</a></div>`,
	`<base href="http://other.example.com/dir/"><a href="rel">r</a><base href="/ignored">`,
	`<html lang=en><head><title>T</title><base href="javascript:x"></head><body><a href="x">x</a></body></html>  <!--after--> `,
	`<html><head><title>T</title></head><body><p>x</p></body></html><a href="/after">late</a>`,
	`<html><head><title>T</title></head><body>x</body>trailing text</html>`,
	`<html><head><title>T</title></head>   <body>x</body></html>`,
	`<html><head><title>T</title><div>body starts</div></head><a href="/h">h</a>`,
	`<html><head><title>T</title></head><script>s</script><body>x</body>`,
	`<head><title>no html tag</title><meta charset=utf-8><style>p{}</style></head><span>text</span>`,
	`<title>only a title`,
	`<title>unclosed <a href="/in-title">x</a>`,
	`<script>document.write("<a href='/js'>")</script><a href="/real">r</a>`,
	`<textarea><a href="/ta">x</a></textarea><xmp><a href="/xmp">x</a></xmp><iframe><a href="/if"></a></iframe>`,
	`<plaintext><a href="/pt">x</a>`,
	`<select><option><a href="/opt">o</a></select>`,
	`<div><span>unclosed <em>at eof`,
	`<div></span></div><a href="/stray">s</a>`,
	`</p><br></br><a href="/br">b</a>`,
	`<div/><a href="/selfclosed">x</a><img src=/i.png/><br/>`,
	`<my-widget class="product"><span class=sku>C</span></my-widget><x-y><a href=/custom>c</a></x-y>`,
	`<h1>a<h2>b</h2></h1><h3>c</h3>`,
	`<button><button>x</button></button><a href="/b">b</a>`,
	`<section><div itemtype="Thing Product"><span class="sku">M</span><h1>micro</h1></div></section>`,
	`<nav><a href="/n1">1</a><div><a href="/n2">2</a></div><area href="/area"></nav>`,
	`<ul><li data-next="/dn"><a href="/li-a">a</a></li></ul><div id="main"><a href="/m">m</a><a>no href</a></div>`,
	`<div id=main><a href="  /spaces  ">s</a><a href="&#x2F;ent&amp;x=1">e</a><a href="http://[bad">b</a></div>`,
	"<div class=\"product\"><span class=\"sku\">\u00a0S\u2003</span><p class=price>\x00nul</p></div>",
	"<div class=product\f><span\tclass=sku>tab</span></div>",
	`<!doctype html><html><body><frameset><frame></frameset></body></html>`,
	`<image src=x><isindex><keygen><nobr>a<nobr>b`,
	`<ruby>a<rt>b<rp>c</ruby><a href="/ruby">r</a>`,
	`<p><address>a</address></p><hr><p>x<hr>`,
	`<object><a href="/obj">o</a></object><marquee>m</marquee><applet>a</applet>`,
	`<body><body class=x><a href="/bb">b</a>`,
	`<html><html lang=de><a href="/hh">h</a>`,
	`<head></head><head><a href="/h2">h</a>`,
	`<li>x</p>y</li>`,
	`<![CDATA[<a href="/cdata">c</a>]]><a href="/after-cdata">a</a>`,
	`<a href=/x/>slash</a><a href='/q"'>q</a><a href=/dup href=/dup2>d</a>`,
	`<div class="product"><span class="sku">A</span></div><div class="product"><span class="sku">A</span></div><div class="product"><p>no sku</p></div>`,
	`<div class="product"><div class="product"><span class="sku">inner</span></div><span class="sku">outer</span></div>`,
	strings.Repeat("<div>", 600) + `<a href="/deep">d</a>`,
	strings.Repeat("<span>", 470) + `<a href="/deepish">d</a>`,
}

func TestStreamMatchesDOMOnHostilePages(t *testing.T) {
	t.Parallel()
	specs := []Spider{mustSpider(t, goodSpec), mustSpider(t, subsetSpec),
		shippedSpider(t, "demo.yaml", map[string]string{"base_url": "http://example.com"})}
	streamed := 0
	for _, body := range append(hostilePages, productPage) {
		for _, sp := range specs {
			for _, u := range []string{"http://example.com/catalogue/item-1.html", "http://example.com/x"} {
				if bothPaths(t, sp, &Response{URL: u, Body: []byte(body), Depth: 1}) {
					streamed++
				}
			}
		}
	}
	// Both outcomes must be exercised: pages the stream takes and pages it leaves to the DOM.
	if total := len(specs) * 2 * (len(hostilePages) + 1); streamed == 0 || streamed == total {
		t.Fatalf("stream took %d of %d hostile pages", streamed, total)
	}
}

func TestHostOf(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"http://example.com/", "https://Example.COM:8443/a?b#c", "http://127.0.0.1:9000/x",
		"http://[::1]:80/", "http://user:pw@example.com/", "http://xn--bcher-kva.example/", "http://example.com:/",
		"http://0x7f.1/", "http://a.b.c.:81", "http://%65xample.com/", "http://example.com?q", "http://example.com#f"} {
		u, err := urlx.Canonical(raw)
		if err != nil {
			continue
		}
		if h := hostOf(u); h != urlx.Hostname(u) {
			t.Errorf("hostOf(%q) = %q, urlx.Hostname says %q", u, h, urlx.Hostname(u))
		}
	}
}

// Selectors outside the subset keep the spider on the DOM path; inside it, they compile.
func TestStreamPlan(t *testing.T) {
	t.Parallel()
	for css, want := range map[string]bool{
		"a": true, "div.product > h1.title": true, "ul li a[href]": true, "#main, .x": true, "[data-x=\"a b\"]": true,
		"*": true, "a[rel~=next]": true, "a:first-child": false, "a + b": false, "a ~ b": false, "p:contains(x)": false,
		"a[href^=http]": false, `.a\:b`: false, "[href='a,b']": false, "a[x] > [y=z]": true,
	} {
		spec := mustSpec(t, fmt.Sprintf("name: s\nstart_urls: [http://a.com/]\nfollow: [{css: %q}]\n", css))
		if got := compileStream(spec) != nil; got != want {
			t.Errorf("css %q: streamable %v, want %v", css, got, want)
		}
	}
	spec := mustSpec(t, "name: s\nstart_urls: [http://a.com/]\nitems: [{key: k, fields: {k: {css: p, attr: html}}}]\n")
	if compileStream(spec) != nil {
		t.Error("attr: html is streamable; it needs the DOM")
	}
}

// FuzzStreamMatchesDOM: on any page, the streaming path and the DOM path agree, for the
// test specs and for a spec that uses the fuzzed selector everywhere a selector goes.
func FuzzStreamMatchesDOM(f *testing.F) {
	sels := []string{"a", "div.product > h1.title", "ul li a[href]", "#main, .x", `[data-x="a b"]`, "* > *", "a[rel~=next] b"}
	for i, p := range hostilePages {
		f.Add(p, sels[i%len(sels)])
	}
	f.Add(productPage, "div.product span")
	specs := []Spider{mustSpider(f, goodSpec), mustSpider(f, subsetSpec)}
	f.Fuzz(func(t *testing.T, body, css string) {
		resp := &Response{URL: "http://example.com/catalogue/item-1.html", Body: []byte(body), Depth: 1}
		for _, sp := range specs {
			bothPaths(t, sp, resp)
		}
		for _, r := range css {
			if r < ' ' || r > '~' || r == '"' || r == '\\' {
				return // keeps the YAML below well-formed
			}
		}
		spec, err := ParseSpec([]byte(fmt.Sprintf(`{name: f, start_urls: ["http://example.com/"], follow: [{css: "%[1]s"}],
			items: [{css: "%[1]s", key: k, fields: {k: {}, v: {css: "%[1]s"}, a: {css: "%[1]s", attr: class}}}]}`, css)), "fuzz")
		if err != nil {
			return
		}
		sp, err := Compile(spec)
		if err != nil || sp.(*declarative).stream == nil {
			return
		}
		bothPaths(t, sp, resp)
	})
}

// BenchmarkParseBenchPage parses the bench site's item and listing pages with each path:
// CPU and allocations per page of extraction (go test -bench ParseBenchPage -benchmem).
func BenchmarkParseBenchPage(b *testing.B) {
	data, err := os.ReadFile("../../spiders/benchsite.yaml")
	if err != nil {
		b.Fatal(err)
	}
	sp, err := WithArgs(mustSpider(b, string(data)), map[string]string{"base_url": "http://127.0.0.1:9000"})
	if err != nil {
		b.Fatal(err)
	}
	var list strings.Builder
	list.WriteString("<h1>Listing 3</h1><ul>")
	for i := 41; i <= 60; i++ {
		fmt.Fprintf(&list, `<li><a class="item" href="/item/%d">Item %d</a></li>`, i, i)
	}
	list.WriteString(`</ul><a class="next" href="/list/4">Next</a>`)
	pages := map[string]*Response{
		"item": {URL: "http://127.0.0.1:9000/item/42", Status: 200, Depth: 2, Body: benchPage("Item 42",
			`<div class="product"><h1 class="title">Item 42</h1><p class="price">43.42</p><p class="desc">`+
				strings.Repeat("Lorem ipsum dolor sit amet. ", 20)+`</p><a href="/list/1">Back</a></div>`)},
		"listing": {URL: "http://127.0.0.1:9000/list/3", Status: 200, Depth: 2, Body: benchPage("Listing 3", list.String())},
	}
	for _, path := range []string{"stream", "dom"} {
		d := *sp.(*declarative)
		d.domOnly = path == "dom"
		for _, name := range []string{"item", "listing"} {
			resp := pages[name]
			b.Run(path+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if _, err := d.ParseStats(context.Background(), resp); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
