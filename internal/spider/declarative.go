package spider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"

	"crawlq/internal/urlx"
)

const (
	// MaxParseBytes is how much of a body Parse reads; the rest is ignored, so one huge
	// page cannot exhaust a worker's memory.
	MaxParseBytes = 8 << 20
	// MaxLinksPerPage bounds the follow requests one page may produce.
	MaxLinksPerPage = 5000
)

var defaultLinks = cascadia.MustCompile("a[href], area[href]")

type declarative struct {
	name     string
	start    []string // canonical
	settings Settings
	follow   []followRule
	items    []itemRule
	// stream extracts without a DOM where every selector allows it (stream.go); nil: the DOM.
	stream *streamPlan
	// domOnly turns the streaming path off (the differential test compares both).
	domOnly bool
	line    string // StateLine (revisit.go)
}

type followRule struct {
	css     cascadia.Selector // nil: defaultLinks
	pattern *regexp.Regexp
	deny    *regexp.Regexp
	render  string // "": the spider's
}

type itemRule struct {
	match  *regexp.Regexp
	css    cascadia.Selector
	key    string
	fields []fieldRule
}

type fieldRule struct {
	name     string
	css      cascadia.Selector // nil: the container
	attr     string
	required bool
}

// Compile turns a declarative spec into a Spider. Command specs return ErrCommandSpider.
func Compile(spec *Spec) (Spider, error) {
	if spec == nil {
		return nil, errors.New("compile spider: nil spec")
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.IsCommand() {
		return nil, fmt.Errorf("compile spider %s: %w", spec.Name, ErrCommandSpider)
	}
	d := &declarative{name: spec.Name, settings: spec.settings(), line: stateLine(spec)}
	for _, raw := range spec.StartURLs {
		c, _ := urlx.Canonical(raw) // validated
		d.start = append(d.start, c)
	}
	for _, f := range spec.Follow {
		d.follow = append(d.follow, followRule{css: compileCSS(f.CSS), pattern: compileRE(f.Pattern), deny: compileRE(f.Deny), render: f.Render})
	}
	for _, it := range spec.Items {
		r := itemRule{match: compileRE(it.Match), css: compileCSS(it.CSS), key: it.Key}
		for _, name := range sortedKeys(it.Fields) {
			f := it.Fields[name]
			attr := f.Attr
			if attr == "" {
				attr = "text"
			}
			r.fields = append(r.fields, fieldRule{name: name, css: compileCSS(f.CSS), attr: attr, required: f.Required || name == it.Key})
		}
		d.items = append(d.items, r)
	}
	d.stream = compileStream(spec)
	return d, nil
}

func compileCSS(s string) cascadia.Selector {
	if s == "" {
		return nil
	}
	return cascadia.MustCompile(s) // validated
}

func compileRE(s string) *regexp.Regexp {
	if s == "" {
		return nil
	}
	return regexp.MustCompile(s) // validated
}

func (d *declarative) Name() string { return d.name }

func (d *declarative) Settings() Settings {
	s := d.settings
	s.AllowedDomains = append([]string(nil), s.AllowedDomains...)
	return s
}

// WithArgs binds the spider to a run's args: base_url adds its host to AllowedDomains,
// so pages of a run started elsewhere are followed.
func (d *declarative) WithArgs(args map[string]string) (Spider, error) {
	if err := d.checkArgs(args); err != nil {
		return d, err
	}
	base, err := d.baseURL(args)
	if err != nil || base == nil {
		return d, err
	}
	cp := *d
	cp.settings.AllowedDomains = append([]string(nil), d.settings.AllowedDomains...)
	host := strings.Trim(base.Hostname(), "[]")
	if !urlx.InDomains(host, cp.settings.AllowedDomains) {
		cp.settings.AllowedDomains = append(cp.settings.AllowedDomains, host)
	}
	return &cp, nil
}

// DeclarativeArgs are the run arguments a declarative spider reads; it refuses any other, so a
// misspelt one is not silently ignored.
var DeclarativeArgs = []string{"base_url"}

// checkArgs refuses an argument the spider does not read.
func (d *declarative) checkArgs(args map[string]string) error {
	var unknown []string
	for _, k := range sortedKeys(args) {
		if !slices.Contains(DeclarativeArgs, k) {
			unknown = append(unknown, strconv.Quote(truncate(k)))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	what := "argument"
	if len(unknown) > 1 {
		what = "arguments"
	}
	return fmt.Errorf("%s %s: spider %s accepts only %s", what, strings.Join(unknown, ", "), d.name, strings.Join(DeclarativeArgs, ", "))
}

// baseURL parses args["base_url"], nil if unset.
func (d *declarative) baseURL(args map[string]string) (*url.URL, error) {
	raw, ok := args["base_url"]
	if !ok || raw == "" {
		return nil, nil
	}
	c, err := urlx.Canonical(raw)
	if err != nil {
		return nil, fmt.Errorf("spider %s: arg base_url: %w", d.name, err)
	}
	u, err := url.Parse(c)
	if err != nil {
		return nil, fmt.Errorf("spider %s: arg base_url: %w", d.name, err)
	}
	if u.Path != "/" || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("spider %s: arg base_url %q: want scheme://host[:port] only", d.name, truncate(raw))
	}
	if !d.settings.AllowPrivate && urlx.IsLinkLocal(u.Hostname()) {
		return nil, fmt.Errorf("spider %s: arg base_url: link-local/metadata host %q not allowed", d.name, u.Hostname())
	}
	return u, nil
}

// StartRequests returns the start URLs; args["base_url"] (scheme://host[:port]) replaces
// their scheme and host, so one spec crawls a site wherever it is served.
func (d *declarative) StartRequests(ctx context.Context, args map[string]string) ([]Request, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := d.checkArgs(args); err != nil {
		return nil, err
	}
	base, err := d.baseURL(args)
	if err != nil {
		return nil, err
	}
	reqs := make([]Request, 0, len(d.start))
	seen := map[string]bool{}
	for _, s := range d.start {
		if base != nil {
			u, _ := url.Parse(s)
			u.Scheme, u.Host = base.Scheme, base.Host
			if s, err = urlx.Canonical(u.String()); err != nil {
				return nil, fmt.Errorf("spider %s: rebase start url: %w", d.name, err)
			}
		}
		if !seen[s] {
			seen[s] = true
			reqs = append(reqs, Request{URL: s, Depth: 0})
		}
	}
	return reqs, nil
}

// Parse extracts items and links; see ParseStats.
func (d *declarative) Parse(ctx context.Context, resp *Response) ([]Item, []Request, error) {
	r, err := d.ParseStats(ctx, resp)
	return r.Items, r.Follow, err
}

// ParseStats extracts items and links from one page. Non-2xx and non-HTML responses
// yield nothing. Items missing a required field (or their key) are dropped and counted
// in Stats.Dropped; a repeated key on the page keeps the first item.
func (d *declarative) ParseStats(ctx context.Context, resp *Response) (Result, error) {
	var res Result
	if resp == nil {
		return res, errors.New("parse page: nil response")
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if resp.Status != 0 && (resp.Status < 200 || resp.Status > 299) {
		return res, nil
	}
	if !isHTML(resp) {
		return res, nil
	}
	pageURL, err := url.Parse(resp.URL)
	if err != nil || !pageURL.IsAbs() {
		return res, fmt.Errorf("parse page: %w: response URL %q is not absolute", ErrBadPage, truncate(resp.URL))
	}
	body := resp.Body
	if len(body) > MaxParseBytes {
		body = body[:MaxParseBytes]
	}
	if !utf8.Valid(body) {
		body = bytes.ToValidUTF8(body, []byte("\uFFFD"))
	}
	active := make([]bool, len(d.items))
	for i, r := range d.items {
		active[i] = r.match == nil || r.match.MatchString(resp.URL)
	}
	var page *pageData
	if d.stream != nil && !d.domOnly {
		page, _ = d.stream.extract(body, active)
	}
	if page == nil {
		if page, err = d.domExtract(body, active); err != nil {
			return res, fmt.Errorf("parse page %s: %w: %v", truncate(resp.URL), ErrBadPage, err)
		}
	}
	d.finishItems(page, pageURL, &res)
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	d.finishLinks(page, pageURL, resp.Depth, &res)
	return res, nil
}

func isHTML(resp *Response) bool {
	ct := resp.Header.Get("Content-Type")
	if ct == "" || ct == "text/html; charset=utf-8" {
		return true // sniffing is the fetcher's job; assume HTML
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "text/html" || mt == "application/xhtml+xml" || mt == "text/xml" || mt == "application/xml"
}

// pageData is what extraction reads off one page, by either path (the DOM here, the token
// stream in stream.go): raw values in document order, before the collapsing, resolving and
// de-duplication that finishItems and finishLinks apply alike.
type pageData struct {
	base  *string        // the href of the first base[href], if any
	links [][]string     // per follow rule: candidate hrefs in document order
	items [][][]rawField // per item rule: per container in document order: per field (rule order)
}

// rawField is a field as found: ok is false when the element or attribute is missing.
type rawField struct {
	v  string
	ok bool
}

// domExtract parses body into a DOM (goquery) and reads the page data off it; it handles
// every selector and page.
func (d *declarative) domExtract(body []byte, active []bool) (*pageData, error) {
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	p := &pageData{links: make([][]string, len(d.follow)), items: make([][][]rawField, len(d.items))}
	if href, ok := doc.Find("base[href]").First().Attr("href"); ok {
		p.base = &href
	}
	for i, rule := range d.follow {
		p.links[i] = rule.hrefs(doc)
	}
	for i, r := range d.items {
		if !active[i] {
			continue
		}
		containers := doc.Selection
		if r.css != nil {
			containers = doc.FindMatcher(r.css)
		}
		containers.Each(func(_ int, c *goquery.Selection) {
			fields := make([]rawField, len(r.fields))
			for j, f := range r.fields {
				fields[j] = domField(c, f)
			}
			p.items[i] = append(p.items[i], fields)
		})
	}
	return p, nil
}

func domField(c *goquery.Selection, f fieldRule) rawField {
	sel := c
	if f.css != nil {
		sel = c.FindMatcher(f.css).First()
	}
	if sel.Length() == 0 {
		return rawField{}
	}
	switch f.attr {
	case "text":
		return rawField{v: sel.Text(), ok: true}
	case "html":
		h, err := sel.Html()
		return rawField{v: h, ok: err == nil}
	}
	v, ok := sel.Attr(f.attr)
	return rawField{v: v, ok: ok}
}

func (d *declarative) finishItems(p *pageData, page *url.URL, res *Result) {
	seen := map[string]bool{}
	for i, r := range d.items {
	containers:
		for c, raw := range p.items[i] {
			fields := make(map[string]any, len(r.fields))
			for j, f := range r.fields {
				v, ok := fieldValue(raw[j], f, page)
				if !ok {
					if f.required {
						res.Stats.Dropped++
						res.Dropped = append(res.Dropped, Dropped{Rule: i, Container: c + 1, Field: f.name, Key: f.name == r.key})
						continue containers
					}
					continue
				}
				fields[f.name] = v
			}
			key, _ := fields[r.key].(string)
			if seen[key] {
				res.Stats.Duplicates++
				continue
			}
			seen[key] = true
			res.Items = append(res.Items, Item{Key: key, Fields: fields})
		}
	}
}

// fieldValue returns the field's value and whether it is present and non-empty.
// href and src attributes are resolved against the page URL, as a link is only useful
// absolute.
func fieldValue(raw rawField, f fieldRule, page *url.URL) (string, bool) {
	if !raw.ok {
		return "", false
	}
	var v string
	switch f.attr {
	case "text":
		v = collapse(raw.v)
	case "html":
		v = strings.TrimSpace(raw.v)
	default:
		v = collapse(raw.v)
		if f.attr == "href" || f.attr == "src" {
			if abs, err := urlx.Resolve(page, v); err == nil {
				v = abs
			}
		}
	}
	return v, v != ""
}

func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

func (d *declarative) finishLinks(p *pageData, pageURL *url.URL, depth int, res *Result) {
	if len(d.follow) == 0 {
		return
	}
	if d.settings.MaxDepth > 0 && depth+1 > d.settings.MaxDepth {
		return
	}
	base := pageURL
	if p.base != nil {
		if b, err := pageURL.Parse(strings.TrimSpace(*p.base)); err == nil && (b.Scheme == "http" || b.Scheme == "https") {
			base = b
		}
	}
	seen := map[string]bool{}
	for i, rule := range d.follow {
		for _, href := range p.links[i] {
			res.Stats.Links++
			u, err := urlx.Resolve(base, href)
			if err != nil || seen[u] || !d.accept(rule, u) {
				res.Stats.Filtered++
				continue
			}
			if len(res.Follow) >= MaxLinksPerPage {
				res.Stats.Filtered++
				continue
			}
			seen[u] = true
			res.Follow = append(res.Follow, Request{URL: u, Depth: depth + 1, Render: rule.render})
		}
	}
}

// hrefs returns the rule's candidate hrefs in document order.
func (r followRule) hrefs(doc *goquery.Document) []string {
	var out []string
	collect := func(s *goquery.Selection) {
		for _, n := range s.Nodes {
			for _, a := range n.Attr {
				if a.Key == "href" && a.Namespace == "" {
					out = append(out, a.Val)
					break
				}
			}
		}
	}
	if r.css == nil {
		collect(doc.FindMatcher(defaultLinks))
		return out
	}
	doc.FindMatcher(r.css).Each(func(_ int, s *goquery.Selection) {
		if _, ok := s.Attr("href"); ok {
			collect(s)
			return
		}
		collect(s.FindMatcher(defaultLinks))
	})
	return out
}

func (d *declarative) accept(r followRule, u string) bool {
	if r.pattern != nil && !r.pattern.MatchString(u) {
		return false
	}
	if r.deny != nil && r.deny.MatchString(u) {
		return false
	}
	host := hostOf(u)
	if !d.settings.AllowPrivate && urlx.IsLinkLocal(host) {
		return false
	}
	return urlx.InDomains(host, d.settings.AllowedDomains)
}

// hostOf returns urlx.Hostname(u) for a canonical URL u (as urlx.Resolve returns) without
// canonicalising it again: the authority between "://" and the next '/', '?' or '#', its
// port dropped. Authorities with user info, an IPv6 literal or escapes take urlx.Hostname.
func hostOf(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return urlx.Hostname(u)
	}
	auth := u[i+3:]
	if end := strings.IndexAny(auth, "/?#"); end >= 0 {
		auth = auth[:end]
	}
	if auth == "" || strings.ContainsAny(auth, "@[]%") {
		return urlx.Hostname(u)
	}
	if c := strings.LastIndexByte(auth, ':'); c >= 0 {
		for _, r := range auth[c+1:] {
			if r < '0' || r > '9' {
				return urlx.Hostname(u)
			}
		}
		auth = auth[:c]
	}
	return auth
}
