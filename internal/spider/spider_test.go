package spider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"crawlq/internal/urlx"
)

const goodSpec = `
name: books
start_urls: ["http://Example.com:80/catalogue/"]
allowed_domains: [example.com]
follow:
  - css: "ul.pager"
  - pattern: '/item-\d+\.html$'
    deny: 'item-13\.html'
items:
  - match: '/item-\d+\.html$'
    css: div.product
    key: sku
    fields:
      sku: {css: span.sku, required: true}
      title: {css: h1}
      price: {css: p.price, required: true}
      link: {css: a.self, attr: href}
max_depth: 3
delay: 250ms
concurrency: 2
`

func mustSpider(t testing.TB, yamlText string) Spider {
	t.Helper()
	spec, err := ParseSpec([]byte(yamlText), "test.yaml")
	if err != nil {
		t.Fatalf("ParseSpec: %v", err)
	}
	sp, err := Compile(spec)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return sp
}

func TestParseSpecSettings(t *testing.T) {
	t.Parallel()
	sp := mustSpider(t, goodSpec)
	st := sp.Settings()
	want := Settings{AllowedDomains: []string{"example.com"}, MaxDepth: 3, Delay: 250e6, Concurrency: 2,
		UserAgent: DefaultUserAgent, ObeyRobots: true, Runtime: "lambda", Queue: "crawl", Retry: Retry{}.WithDefaults()}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("settings = %+v\nwant %+v", st, want)
	}
	reqs, err := sp.StartRequests(context.Background(), nil)
	if err != nil || len(reqs) != 1 || reqs[0] != (Request{URL: "http://example.com/catalogue/"}) {
		t.Fatalf("StartRequests = %v, %v", reqs, err)
	}
}

func TestParseSpecJSON(t *testing.T) {
	t.Parallel()
	js := "{\n\t\"name\": \"j\",\n\t\"start_urls\": [\"https://example.org/\"],\n\t\"obey_robots\": false,\n\t\"follow\": [{\"css\": \"a\"}]\n}"
	sp := mustSpider(t, js)
	st := sp.Settings()
	if st.ObeyRobots || len(st.AllowedDomains) != 1 || st.AllowedDomains[0] != "example.org" {
		t.Fatalf("settings = %+v (want robots off, allowed domains from start URL)", st)
	}
}

func TestParseSpecReportsEveryMistake(t *testing.T) {
	t.Parallel()
	bad := `
name: Bad Name
start_urls: ["http://example.com/", "http://other.org/", "file:///etc/passwd", "/relative", "http://169.254.169.254/latest"]
allowed_domains: [example.com, "http://x.com/", 169.254.169.254]
follow:
  - css: "p..x"
  - pattern: "([a-z"
  - {}
items:
  - key: id
    fields:
      price: {css: "p..x"}
      "bad name": {css: p}
  - css: div
    key: x
    fields: {x: {attr: "bad attr"}}
delay: -1s
concurrency: 65
max_pages: -1
runtime: k8s
command: ["x"]
unknown_field: 1
`
	_, err := ParseSpec([]byte(bad), "bad.yaml")
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want *ValidationError, got %v", err)
	}
	wantPaths := []string{
		"unknown_field", "name", "start_urls[1]", "start_urls[2]", "start_urls[3]", "start_urls[4]",
		"allowed_domains[1]", "allowed_domains[2]", "delay", "concurrency", "max_pages", "runtime",
		"follow[0].css", "follow[1].pattern", "follow[2]", "items[0].key", "items[0].fields.price.css",
		"items[0].fields", "items[1].fields.x.attr", "command",
	}
	got := map[string]string{}
	for _, fe := range ve.Errors {
		got[fe.Path] += fe.Msg + " | "
	}
	for _, p := range wantPaths {
		if _, ok := got[p]; !ok {
			t.Errorf("no error at %s; got %v", p, ve.Errors)
		}
	}
	for _, frag := range []string{
		`start_urls[2]: scheme "file" not allowed`,
		`items[0].fields.price.css: invalid CSS selector "p..x"`,
		"delay: negative",
		"unknown_field",
		`start_urls[4]: link-local/metadata host "169.254.169.254"`,
		"start_urls[1]: host \"other.org\" is not inside allowed_domains",
	} {
		if !strings.Contains(err.Error(), frag) {
			t.Errorf("error lacks %q:\n%v", frag, err)
		}
	}
	if !strings.HasPrefix(err.Error(), "invalid spider bad.yaml: ") {
		t.Errorf("error does not name its source: %v", err)
	}
}

// Decode errors name the field path and line, not a Go type; a key given twice is reported
// alone, without the false problems of a spec left half decoded.
func TestParseSpecDecodeErrorsByPath(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		text string
		want []string
	}{
		"int overflow": {"name: a\nstart_urls: [http://a.com/]\nmax_pages: 99999999999999999999999\n",
			[]string{"max_pages: want an integer, got 99999999999999999999999, out of range (line 3)"}},
		"nested": {"name: a\nstart_urls: [http://a.com/]\nretry:\n  max_dead_share: abc\nitems:\n  - key: a\n    fields:\n      a: {css: a, required: maybe}\n",
			[]string{`retry.max_dead_share: want a number, got "abc" (line 4)`, `items[0].fields.a.required: want true or false, got "maybe" (line 8)`}},
		"list for string, with a real problem": {"name: a\nstart_urls: [http://a.com/, [x], http://b.com/]\nallowed_domains: [a.com]\nconcurrency: 99\n",
			[]string{"start_urls[1]: want a string, got a list (line 2)", "concurrency: 99 out of range 1..64"}},
		"scalar for list": {"name: a\nstart_urls: http://a.com/\n",
			[]string{`start_urls: want a list, got "http://a.com/" (line 2)`}},
		"scalar for mapping": {"name: a\nstart_urls: [http://a.com/]\nretry: 5\n",
			[]string{"retry: want a mapping, got 5 (line 3)"}},
		"bad map value": {"name: a\nstart_urls: [http://a.com/]\nitems: [{key: a, fields: {a: [x]}}]\n",
			[]string{"items[0].fields.a: want a mapping, got a list (line 3)"}},
		"not a mapping": {"just words\n", []string{`want a mapping, got "just words" (line 1)`}},
		"duplicate key": {"name: dup\nname: dup2\nstart_urls: [http://a.com/]\n",
			[]string{"name: given twice (line 2, first at line 1)"}},
		"nested duplicate": {"name: a\nstart_urls: [http://a.com/]\nitems:\n  - key: a\n    fields:\n      a: {css: p}\n      a: {css: q}\n",
			[]string{"items[0].fields.a: given twice (line 7, first at line 6)"}},
	} {
		_, err := ParseSpec([]byte(c.text), "t.yaml")
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: want *ValidationError, got %v", name, err)
			continue
		}
		var got []string
		for _, fe := range ve.Errors {
			got = append(got, fe.String())
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s: errors\n  %s\nwant\n  %s", name, strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
		}
	}
}

func TestParseSpecEdgeCases(t *testing.T) {
	t.Parallel()
	for name, text := range map[string]string{
		"empty":          "",
		"not yaml":       "name: [",
		"two docs":       "name: a\nstart_urls: [http://a.com/]\n---\nname: b\n",
		"wrong type":     "name: a\nstart_urls: http://a.com/\n",
		"no start":       "name: a\n",
		"command no cmd": "name: a\nkind: command\n",
		"bad kind":       "name: a\nkind: shell\nstart_urls: [http://a.com/]\n",
		"file in env":    "name: a\nkind: command\ncommand: [scrapy, crawl, a]\nenv: {U: 'file:///etc/passwd'}\n",
		"metadata arg":   "name: a\nkind: command\ncommand: [curl, 'http://169.254.169.254/']\n",
		"bad timeout":    "name: a\nkind: command\ncommand: [x]\ntimeout: soon\n",
		"private domain": "name: a\nstart_urls: [http://metadata.google.internal/]\n",
		"hex metadata":   "name: a\nstart_urls: ['http://0xa9fea9fe/']\n",
		"ctrl in ua":     "name: a\nstart_urls: [http://a.com/]\nuser_agent: \"x\\r\\nX-Evil: 1\"\n",
		"cmd with items": "name: a\nkind: command\ncommand: [x]\nitems: [{key: a, fields: {a: {css: p}}}]\n",
		"decl with cmd":  "name: a\nstart_urls: [http://a.com/]\ncommand: [x]\n",
		"key not field":  "name: a\nstart_urls: [http://a.com/]\nitems: [{key: b, fields: {a: {css: p}}}]\n",
	} {
		var ve *ValidationError
		if _, err := ParseSpec([]byte(text), name); !errors.As(err, &ve) || len(ve.Errors) == 0 {
			t.Errorf("%s: want *ValidationError, got %v", name, err)
		}
	}
	// allow_private lets a spider reach metadata addresses on purpose.
	if _, err := ParseSpec([]byte("name: a\nallow_private: true\nstart_urls: [http://169.254.169.254/]\n"), "p"); err != nil {
		t.Errorf("allow_private: %v", err)
	}
}

const productPage = `<!doctype html><html><head><title>x</title></head><body>
<ul class="pager"><li><a href="page-2.html">next</a></li><li><a href="page-2.html#top">again</a></li></ul>
<div class="product"><h1>  Blue
   Widget </h1><p class="price">£9.99</p><span class="sku">SKU-1</span><a class="self" href="/item-1.html">self</a></div>
<div class="product"><h1>No price</h1><span class="sku">SKU-2</span></div>
<div class="product"><h1>Dup</h1><p class="price">1</p><span class="sku">SKU-1</span></div>
<div class="product"><h1>No sku</h1><p class="price">1</p></div>
<a href="item-7.html">7</a><a href="item-13.html">13</a><a href="http://elsewhere.org/item-8.html">8</a>
<a href="https://shop.example.com/item-9.html">9</a><a href="javascript:void(0)">js</a><a href="mailto:x@y">m</a>
<a href="item-7.html#reviews">7 again</a>
</body></html>`

func TestParseExtracts(t *testing.T) {
	t.Parallel()
	sp := mustSpider(t, goodSpec)
	resp := &Response{URL: "http://example.com/catalogue/item-1.html", Status: 200, Body: []byte(productPage), Depth: 1,
		Header: http.Header{"Content-Type": {"text/html; charset=utf-8"}}}
	res, err := ParseWithStats(context.Background(), sp, resp)
	if err != nil {
		t.Fatal(err)
	}
	wantItems := []Item{{Key: "SKU-1", Fields: map[string]any{"sku": "SKU-1", "title": "Blue Widget", "price": "£9.99", "link": "http://example.com/item-1.html"}}}
	if !reflect.DeepEqual(res.Items, wantItems) {
		t.Errorf("items = %#v", res.Items)
	}
	if res.Stats.Dropped != 2 || res.Stats.Duplicates != 1 {
		t.Errorf("stats = %+v, want 2 dropped, 1 duplicate", res.Stats)
	}
	// Each drop names its container and the required field it lacks (crawlq spider test shows them).
	if want := []Dropped{{Rule: 0, Container: 2, Field: "price"}, {Rule: 0, Container: 4, Field: "sku", Key: true}}; !reflect.DeepEqual(res.Dropped, want) {
		t.Errorf("dropped = %+v, want %+v", res.Dropped, want)
	}
	var urls []string
	for _, r := range res.Follow {
		if r.Depth != 2 {
			t.Errorf("depth of %s = %d", r.URL, r.Depth)
		}
		urls = append(urls, r.URL)
	}
	want := []string{
		"http://example.com/catalogue/page-2.html",
		"http://example.com/item-1.html", // a.self: matches pattern
		"http://example.com/catalogue/item-7.html",
		"https://shop.example.com/item-9.html",
	}
	if !reflect.DeepEqual(urls, want) {
		t.Errorf("follow = %q\nwant %q", urls, want)
	}
	// Pages whose URL does not match produce no items; depth limit stops links.
	resp.URL, resp.Depth = "http://example.com/catalogue/page-1.html", 3
	items, follow, err := sp.Parse(context.Background(), resp)
	if err != nil || len(items) != 0 || len(follow) != 0 {
		t.Errorf("page at max depth: %d items, %d links, %v", len(items), len(follow), err)
	}
	// Errors and non-HTML yield nothing.
	for _, r := range []*Response{
		{URL: "http://example.com/item-1.html", Status: 404, Body: []byte(productPage)},
		{URL: "http://example.com/item-1.html", Status: 200, Body: []byte(productPage), Header: http.Header{"Content-Type": {"image/png"}}},
	} {
		items, follow, err := sp.Parse(context.Background(), r)
		if err != nil || len(items)+len(follow) != 0 {
			t.Errorf("%d %v: %d items, %d links, %v", r.Status, r.Header, len(items), len(follow), err)
		}
	}
	if _, _, err := sp.Parse(context.Background(), nil); err == nil {
		t.Error("nil response: want error")
	}
	if _, _, err := sp.Parse(context.Background(), &Response{URL: "relative"}); err == nil {
		t.Error("relative response URL: want error")
	}
}

func TestBaseURLArg(t *testing.T) {
	t.Parallel()
	sp := mustSpider(t, "name: d\nstart_urls: ['http://127.0.0.1:8088/', 'http://127.0.0.1:8088/a?x=1']\nallowed_domains: [127.0.0.1]\nfollow: [{css: a}]\n")
	args := map[string]string{"base_url": "http://LocalHost:9999"}
	reqs, err := sp.StartRequests(context.Background(), args)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 2 || reqs[0].URL != "http://localhost:9999/" || reqs[1].URL != "http://localhost:9999/a?x=1" {
		t.Fatalf("rebased = %v", reqs)
	}
	bound, err := WithArgs(sp, args)
	if err != nil {
		t.Fatal(err)
	}
	if got := bound.Settings().AllowedDomains; !reflect.DeepEqual(got, []string{"127.0.0.1", "localhost"}) {
		t.Fatalf("bound allowed domains = %v", got)
	}
	if got := sp.Settings().AllowedDomains; len(got) != 1 {
		t.Fatalf("binding changed the original: %v", got)
	}
	_, follow, err := bound.Parse(context.Background(), &Response{URL: "http://localhost:9999/", Body: []byte(`<a href="/x">x</a>`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(follow) != 1 || follow[0].URL != "http://localhost:9999/x" {
		t.Fatalf("bound follow = %v", follow)
	}
	for _, bad := range []string{"file:///x", "http://169.254.169.254", "http://h/with/path", "nope"} {
		if _, err := sp.StartRequests(context.Background(), map[string]string{"base_url": bad}); err == nil {
			t.Errorf("base_url %q: want error", bad)
		}
	}
	// An argument the spider does not read is refused, naming it and the ones it reads, both
	// when binding (what schedule checks) and when starting.
	for _, c := range []struct {
		args map[string]string
		want string
	}{
		{map[string]string{"bsae_url": "http://localhost:9999"}, `argument "bsae_url": spider d accepts only base_url`},
		{map[string]string{"base_url": "http://localhost:9999", "page": "2", "a": ""}, `arguments "a", "page": spider d accepts only base_url`},
	} {
		if _, err := WithArgs(sp, c.args); err == nil || err.Error() != c.want {
			t.Errorf("bind %v: %v, want %q", c.args, err, c.want)
		}
		if _, err := sp.StartRequests(context.Background(), c.args); err == nil || err.Error() != c.want {
			t.Errorf("start %v: %v, want %q", c.args, err, c.want)
		}
	}
	if _, err := WithArgs(sp, nil); err != nil {
		t.Errorf("no args: %v", err)
	}
}

type goSpider struct{}

func (goSpider) Name() string       { return "gospider" }
func (goSpider) Settings() Settings { return DefaultSettings() }
func (goSpider) StartRequests(context.Context, map[string]string) ([]Request, error) {
	return []Request{{URL: "http://example.com/"}}, nil
}
func (goSpider) Parse(_ context.Context, r *Response) ([]Item, []Request, error) {
	return []Item{{Key: r.URL, Fields: map[string]any{"len": len(r.Body)}}}, nil, nil
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	if err := reg.Register(goSpider{}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(goSpider{}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("second Register: %v", err)
	}
	if err := reg.RegisterCommand("scrapy-books", DefaultSettings(), CommandSpec{Command: []string{"scrapy", "crawl", "{spider}"}}); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterCommand("gospider", DefaultSettings(), CommandSpec{Command: []string{"x"}}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("command with taken name: %v", err)
	}
	if err := reg.RegisterCommand("empty", DefaultSettings(), CommandSpec{}); err == nil {
		t.Fatal("empty command: want error")
	}
	s, err := reg.Lookup("gospider")
	if err != nil || s.Name() != "gospider" {
		t.Fatalf("Lookup = %v, %v", s, err)
	}
	res, err := ParseWithStats(context.Background(), s, &Response{URL: "http://example.com/", Body: []byte("hi")})
	if err != nil || len(res.Items) != 1 || res.Items[0].Fields["len"] != 2 {
		t.Fatalf("go spider parse = %+v, %v", res, err)
	}
	if _, err := reg.Lookup("nope"); !errors.Is(err, ErrUnknownSpider) {
		t.Fatalf("Lookup(nope): %v", err)
	}
	if _, err := reg.Lookup("scrapy-books"); !errors.Is(err, ErrCommandSpider) {
		t.Fatalf("Lookup(command): %v", err)
	}
	cmd, _, ok := reg.Command("scrapy-books")
	if !ok || !reflect.DeepEqual(cmd.Argv("scrapy-books"), []string{"scrapy", "crawl", "scrapy-books"}) {
		t.Fatalf("Command = %v, %v", cmd, ok)
	}
	if got := reg.Names(); !reflect.DeepEqual(got, []string{"gospider", "scrapy-books"}) {
		t.Fatalf("Names = %v", got)
	}
}

func TestLoadDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "name: a\nstart_urls: [http://a.com/]\nfollow: [{css: a}]\n")
	write("b.json", `{"name": "b", "kind": "command", "command": ["scrapy", "crawl", "{spider}"], "timeout": "10m", "runtime": "ecs"}`)
	write("notes.txt", "ignored")
	reg := NewRegistry()
	if err := reg.LoadDir(dir); err != nil {
		t.Fatal(err)
	}
	if got := reg.Names(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("Names = %v", got)
	}
	cmd, st, ok := reg.Command("b")
	if !ok || cmd.Timeout.Minutes() != 10 || st.Runtime != "ecs" {
		t.Fatalf("command b = %+v %+v %v", cmd, st, ok)
	}

	// All or nothing, every problem listed.
	write("c.yml", "name: a\nstart_urls: [http://c.com/]\n")
	write("d.yaml", "name: d\n")
	reg2 := NewRegistry()
	err := reg2.LoadDir(dir)
	if err == nil || !errors.Is(err, ErrDuplicate) || !strings.Contains(err.Error(), "d.yaml") {
		t.Fatalf("LoadDir with bad specs: %v", err)
	}
	if len(reg2.Names()) != 0 {
		t.Fatalf("partial load: %v", reg2.Names())
	}
}

// The spider specs shipped in spiders/ must load.
func TestShippedSpecs(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	if err := reg.LoadDir("../../spiders"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"demo", "benchsite"} {
		if _, err := reg.Lookup(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

// benchsite.yaml against pages shaped like /work/shared/bench/site/main.go serves.
func TestBenchsiteSpec(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../spiders/benchsite.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sp := mustSpider(t, string(data))
	ctx := context.Background()
	reqs, err := sp.StartRequests(ctx, map[string]string{"base_url": "http://127.0.0.1:9000"})
	if err != nil || len(reqs) != 1 || reqs[0].URL != "http://127.0.0.1:9000/" {
		t.Fatalf("start = %v, %v", reqs, err)
	}
	if sp, err = WithArgs(sp, map[string]string{"base_url": "http://127.0.0.1:9000"}); err != nil {
		t.Fatal(err)
	}
	list := `<!doctype html><html><head><title>Listing 1</title></head><body><h1>Listing 1</h1><ul><li><a class="item" href="/item/1">Item 1</a></li><li><a class="item" href="/item/2">Item 2</a></li></ul><a class="next" href="/list/2">Next</a></body></html>`
	items, follow, err := sp.Parse(ctx, &Response{URL: "http://127.0.0.1:9000/list/1", Status: 200, Body: []byte(list), Depth: 1})
	if err != nil || len(items) != 0 || len(follow) != 3 {
		t.Fatalf("listing: %v items, %v, %v", items, follow, err)
	}
	item := `<!doctype html><html><head><title>Item 5</title></head><body><div class="product"><h1 class="title">Item 5</h1><p class="price">6.05</p><p class="desc">Lorem</p><a href="/list/1">Back</a></div></body></html>`
	items, follow, err = sp.Parse(ctx, &Response{URL: "http://127.0.0.1:9000/item/5", Status: 200, Body: []byte(item), Depth: 2})
	if err != nil || len(items) != 1 || items[0].Fields["price"] != "6.05" || len(follow) != 1 {
		t.Fatalf("item: %v, %v, %v", items, follow, err)
	}
	if items[0].Key == "" {
		t.Fatal("empty key")
	}
}

func TestHostilePages(t *testing.T) {
	t.Parallel()
	sp := mustSpider(t, goodSpec)
	deep := strings.Repeat("<div>", 5000) + `<div class="product"><span class="sku">S</span><p class="price">1</p></div>`
	var wide strings.Builder
	for i := 0; i < MaxLinksPerPage+500; i++ {
		fmt.Fprintf(&wide, `<p><a href="/item-%d.html">x</a></p>`, i)
	}
	bad := "<div class=\"product\"><span class=\"sku\">\xff\xfeS\x80</span><p class=\"price\">\xc3</p></div>"
	for name, body := range map[string]string{"deep": deep, "wide": wide.String(), "invalid utf8": bad, "empty": ""} {
		items, follow, err := sp.Parse(context.Background(), &Response{URL: "http://example.com/item-1.html", Body: []byte(body)})
		if len(follow) > MaxLinksPerPage {
			t.Errorf("%s: %d links, more than MaxLinksPerPage", name, len(follow))
		}
		if name == "wide" && len(follow) != MaxLinksPerPage {
			t.Errorf("wide: %d links, want the cap %d", len(follow), MaxLinksPerPage)
		}
		if name == "deep" {
			// x/net/html refuses more than 512 open elements: a permanent page error.
			if !errors.Is(err, ErrBadPage) {
				t.Errorf("deep: %v, want ErrBadPage", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		for _, it := range items {
			for k, v := range it.Fields {
				if s, ok := v.(string); ok && !utf8.ValidString(s) {
					t.Errorf("%s: field %s not UTF-8", name, k)
				}
			}
		}
	}
}

func FuzzParseSpec(f *testing.F) {
	f.Add(goodSpec)
	f.Add("name: a\nstart_urls: [http://a.com/]\n")
	f.Add(`{"name":"b","kind":"command","command":["x"]}`)
	f.Add("a: &a [*a, *a]\n")
	f.Add("items: [{key: k, fields: {k: {css: 'p..'}}}]")
	f.Fuzz(func(t *testing.T, text string) {
		spec, err := ParseSpec([]byte(text), "fuzz")
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Errors) == 0 {
				t.Fatalf("error is not a non-empty *ValidationError: %v", err)
			}
			return
		}
		if spec.IsCommand() {
			if _, err := spec.CommandSpec(); err != nil {
				t.Fatalf("valid command spec: %v", err)
			}
			return
		}
		sp, err := Compile(spec)
		if err != nil {
			t.Fatalf("valid spec does not compile: %v", err)
		}
		if _, err := sp.StartRequests(context.Background(), nil); err != nil {
			t.Fatalf("StartRequests: %v", err)
		}
	})
}

func FuzzExtract(f *testing.F) {
	f.Add(productPage, "http://example.com/catalogue/item-1.html")
	f.Add("<a href='//example.com/x'>x</a><base href='http://example.com/b/'>", "http://example.com/")
	f.Add("<div class=product><span class=sku>\xff</span><p class=price></p>", "http://example.com/item-2.html")
	f.Add(strings.Repeat("<table><tr><td>", 100), "http://example.com/")
	f.Add("<svg><a xlink:href='x' href='y'>", "http://EXAMPLE.com:80/a/../item-3.html")
	sp, err := Compile(mustSpec(f, goodSpec))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body, pageURL string) {
		res, err := ParseWithStats(context.Background(), sp, &Response{URL: pageURL, Body: []byte(body), Depth: 1})
		if err != nil {
			return
		}
		for _, r := range res.Follow {
			if c, err := urlx.Canonical(r.URL); err != nil || c != r.URL {
				t.Fatalf("follow URL %q not canonical (%q, %v)", r.URL, c, err)
			}
		}
		for _, it := range res.Items {
			if it.Key == "" {
				t.Fatal("item with empty key")
			}
		}
	})
}

func mustSpec(t testing.TB, text string) *Spec {
	t.Helper()
	spec, err := ParseSpec([]byte(text), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestRetryBlockErrorsByFieldPath(t *testing.T) {
	t.Parallel()
	spec := `
name: r
start_urls: [http://example.com/]
retry:
  attempts: -1
  backoff: soon
  max_host_pause: 1s
  host_pause: 5s
  max_dead_share: 1.5
  host_down_limit: -2m
  retries: 3
`
	_, err := ParseSpec([]byte(spec), "r.yaml")
	if err == nil {
		t.Fatal("a bad retry block was accepted")
	}
	// Unknown fields are reported by the decoder first; the rest once it is removed.
	if !strings.Contains(err.Error(), "retries") {
		t.Errorf("error %q does not name the unknown field retries", err)
	}
	_, err = ParseSpec([]byte(strings.Replace(spec, "  retries: 3\n", "", 1)), "r.yaml")
	if err == nil {
		t.Fatal("a bad retry block was accepted")
	}
	for _, path := range []string{"retry.backoff", "retry.max_dead_share", "retry.host_down_limit"} {
		if !strings.Contains(err.Error(), path) {
			t.Errorf("error %q does not name %s", err, path)
		}
	}
	good := strings.NewReplacer("attempts: -1", "attempts: 3", "backoff: soon", "backoff: 100ms", "host_pause: 5s", "host_pause: 500ms",
		"max_dead_share: 1.5", "max_dead_share: 0.2", "host_down_limit: -2m", "host_down_limit: 2m", "  retries: 3\n", "").Replace(spec)
	sp := mustSpider(t, good)
	r := sp.Settings().Retry
	if r.Attempts != 3 || r.Backoff != 100*time.Millisecond || r.MaxBackoff != DefaultMaxBackoff || r.HostPause != 500*time.Millisecond ||
		r.MaxHostPause != time.Second || r.HostDownLimit != 2*time.Minute || r.MaxDeadShare != 0.2 {
		t.Fatalf("retry %+v", r)
	}
	if d := r.PageBackoff(1); d != 100*time.Millisecond {
		t.Errorf("first backoff %s", d)
	}
	if d := r.HostPauseAfter(5); d != time.Second {
		t.Errorf("pause after 5 probes %s; want the 1s cap", d)
	}
	_, err = ParseSpec([]byte(strings.Replace(good, "max_host_pause: 1s", "max_host_pause: 100ms", 1)), "r.yaml")
	if err == nil || !strings.Contains(err.Error(), "retry.max_host_pause") {
		t.Errorf("max_host_pause below host_pause: %v", err)
	}
}
