package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"crawlq/internal/cli"
	"crawlq/internal/demosite"
	"crawlq/internal/proxy/proxytest"
)

// A copy of spiders/demo.yaml whose category is required: on the demo site's no-category markup,
// every third item page lacks it, and spider test must say which field of which item is missing.
const requiredCategorySpec = `name: demo-strict
start_urls: [http://127.0.0.1:8088/]
allowed_domains: [127.0.0.1]
follow:
  - css: a
items:
  - match: '/catalogue/item-\d+\.html$'
    css: div.product
    key: sku
    fields:
      sku: {css: span.sku, required: true}
      title: {css: h1.title, required: true}
      category: {css: span.category, required: true}
      url: {css: a.permalink, attr: href}
`

type spiderTestJSON struct {
	Spider string `json:"spider"`
	Status int    `json:"status"`
	Items  []struct {
		Key    string            `json:"key"`
		Fields map[string]string `json:"fields"`
	} `json:"items"`
	Follow []struct {
		URL   string `json:"url"`
		Depth int    `json:"depth"`
	} `json:"follow"`
	Errors []struct {
		Kind      string `json:"kind"`
		Message   string `json:"message"`
		Rule      *int   `json:"rule"`
		Container int    `json:"container"`
		Field     string `json:"field"`
	} `json:"errors"`
	Stats struct {
		Dropped int `json:"dropped"`
	} `json:"stats"`
}

func TestSpiderTestCommand(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	site := demosite.New(demosite.Config{Items: 30, Markup: demosite.MarkupNoCategory})
	addr, err := site.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr.String()
	spec := filepath.Join(t.TempDir(), "strict.yaml")
	if err := os.WriteFile(spec, []byte(requiredCategorySpec), 0o600); err != nil {
		t.Fatal(err)
	}
	test := func(args ...string) (int, spiderTestJSON, string) {
		t.Helper()
		code, out, errs := run(t, "", append([]string{"spider", "test"}, append(args, "--json", "--allow-loopback")...)...)
		var r spiderTestJSON
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%q: exit %d, stdout %q is not JSON (%v); stderr %q", args, code, out, err, errs)
		}
		return code, r, errs
	}

	// An item page with every field: its item, and the links a run would follow from it.
	code, r, errs := test(spec, base+"/catalogue/item-1.html")
	if code != 0 || r.Spider != "demo-strict" || r.Status != 200 || len(r.Items) != 1 || len(r.Errors) != 0 {
		t.Fatalf("item-1: exit %d, %+v, stderr %q", code, r, errs)
	}
	if it := r.Items[0]; it.Key != "CQ-000001" || it.Fields["category"] == "" || it.Fields["url"] != base+"/catalogue/item-1.html" {
		t.Errorf("item-1's item = %+v", it)
	}
	var follow []string
	for _, l := range r.Follow {
		follow = append(follow, l.URL)
		if l.Depth != 1 {
			t.Errorf("link %s at depth %d, want 1", l.URL, l.Depth)
		}
	}
	if !slices.Contains(follow, base+"/catalogue/item-2.html") || !slices.Contains(follow, base+"/") {
		t.Errorf("item-1's links = %q", follow)
	}

	// Item 3 lacks its category: no item, and an error naming the rule, the match and the field.
	code, r, errs = test(spec, base+"/catalogue/item-3.html", "--depth", "2")
	if code != 0 || len(r.Items) != 0 || r.Stats.Dropped != 1 || len(r.Errors) != 1 {
		t.Fatalf("item-3: exit %d, %+v, stderr %q", code, r, errs)
	}
	if e := r.Errors[0]; e.Kind != "missing_field" || e.Field != "category" || e.Rule == nil || *e.Rule != 0 || e.Container != 1 ||
		!strings.Contains(e.Message, `required field "category"`) || !strings.Contains(e.Message, "items[0].fields.category") {
		t.Errorf("item-3's error = %+v", e)
	}
	if len(r.Follow) == 0 || r.Follow[0].Depth != 3 {
		t.Errorf("item-3 at --depth 2: links %+v, want depth 3", r.Follow)
	}
	// The same without --json, for a person.
	code, out, _ := run(t, "", "spider", "test", spec, base+"/catalogue/item-3.html", "--allow-loopback")
	if code != 0 || !strings.Contains(out, "Items (0)") || !strings.Contains(out, `div.product") match 1: item dropped: required field "category" is missing or empty`) {
		t.Errorf("item-3, text: exit %d, %q", code, out)
	}

	// A failed fetch is an error, exit 1: an HTTP 404, and loopback without --allow-loopback.
	code, r, errs = test(spec, base+"/catalogue/item-999.html")
	if code != 1 || len(r.Errors) != 1 || r.Errors[0].Kind != "fetch" || !strings.Contains(errs, "404") {
		t.Errorf("404: exit %d, %+v, stderr %q", code, r, errs)
	}
	hits := site.TotalHits()
	code, out, errs = run(t, "", "spider", "test", spec, base+"/")
	if code != 1 || !strings.Contains(errs, "loopback") || !strings.Contains(out, "loopback") {
		t.Errorf("without --allow-loopback: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if site.TotalHits() != hits {
		t.Errorf("without --allow-loopback the site was reached")
	}

	// A bad spec is refused before any fetch, every mistake by field path; so is a command spider.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: Bad\nstart_urls: [ftp://x/]\nitems: [{key: sku, fields: {sku: {css: '[['}}}]\nspeed: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = run(t, "", "spider", "test", bad, base+"/", "--allow-loopback")
	for _, want := range []string{"4 problem(s)", "speed: unknown field", "name: ", "start_urls[0]: ", "items[0].fields.sku.css: "} {
		if code != 1 || out != "" || !strings.Contains(errs, want) {
			t.Errorf("bad spec: exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errs, want)
		}
	}
	cmd := filepath.Join(t.TempDir(), "cmd.yaml")
	if err := os.WriteFile(cmd, []byte("name: c\nkind: command\nruntime: ecs\ncommand: [scrapy, crawl, '{spider}']\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs = run(t, "", "spider", "test", cmd, base+"/", "--allow-loopback"); code != 1 || !strings.Contains(errs, "declarative specs only") {
		t.Errorf("command spider: exit %d, stderr %q", code, errs)
	}
	if site.TotalHits() != hits {
		t.Errorf("a refused spec reached the site")
	}
	// Usage errors: a URL that is not absolute http(s), a missing argument.
	for _, args := range [][]string{{spec, "ftp://x/"}, {spec, "/relative"}, {spec}} {
		if code, _, errs := run(t, "", append([]string{"spider", "test"}, args...)...); code != 2 {
			t.Errorf("%q: exit %d, stderr %q; want 2", args, code, errs)
		}
	}
	// The built-in demo spec by name.
	if code, r, errs := test("demo", base+"/catalogue/item-2.html"); code != 0 || r.Spider != "demo" || len(r.Items) != 1 {
		t.Errorf("built-in demo: exit %d, %+v, stderr %q", code, r, errs)
	}
}

// spider test fetches through the spec's first proxy, its password from the environment, and
// says so with the password redacted; --direct goes around it.
func TestSpiderTestGoesThroughTheSpecsProxy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	site := demosite.New(demosite.Config{Items: 3})
	addr, err := site.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := proxytest.NewHTTP(t, proxytest.HTTPOptions{User: "tess", Password: "px-s3cret"})
	spec := filepath.Join(t.TempDir(), "px.yaml")
	body := requiredCategorySpec + "proxies: ['" + strings.Replace(px.URL, "px-s3cret", "${CRAWLQ_PROXY_TESS}", 1) + "']\n"
	if err := os.WriteFile(spec, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	test := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := cli.Main(context.Background(), append([]string{"spider", "test", spec, "http://" + addr.String() + "/catalogue/item-1.html", "--allow-loopback"}, args...),
			cli.Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" },
				Environ: func() []string {
					return []string{"CRAWLQ_PROXY_TESS=px-s3cret", "DATABASE_URL=postgres://u:db-s3cret@h/d"}
				}})
		return code, out.String(), errb.String()
	}
	code, out, errs := test("--json")
	var r struct {
		Proxy string `json:"proxy"`
		Items []any  `json:"items"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || len(r.Items) != 1 || px.Tunnels.Load() != 1 {
		t.Fatalf("exit %d, %q (stderr %q), %d tunnels; want the item through one tunnel of the proxy", code, out, errs, px.Tunnels.Load())
	}
	if want := strings.Replace(px.URL, "px-s3cret", "xxxxx", 1); r.Proxy != want || strings.Contains(out+errs, "px-s3cret") {
		t.Errorf("report's proxy %q, want %q, and no password in %q", r.Proxy, want, out+errs)
	}
	if code, out, errs = test("--direct"); code != 0 || px.Tunnels.Load() != 1 || strings.Contains(out, "through") {
		t.Errorf("--direct: exit %d, %q (stderr %q), %d tunnels; want the page fetched without the proxy", code, out, errs, px.Tunnels.Load())
	}
}
