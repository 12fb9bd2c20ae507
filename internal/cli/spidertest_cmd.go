package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	"crawlq/internal/envconfig"
	"crawlq/internal/fetch"
	"crawlq/internal/proxy"
	"crawlq/internal/spider"
	"crawlq/internal/spiderstore"
	"crawlq/spiders"
)

const spiderTestHelp = `Fetches URL once with the spider's settings (its user_agent, allow_private) and runs the
spider's parse on it, as a worker would, without a run, a database or a queue: what scrapy parse
does for a Scrapy spider. It prints the items the page yields, the links the spider would follow
(already filtered by allowed_domains, follow rules and max_depth), and the errors: each item
dropped for a missing or empty required field (naming the item rule, the container and the field),
a page that is not HTML, and a failed fetch.

SPEC is a spec file (YAML or JSON), validated as 'crawlq spider push' does, or the name of a
built-in spec (demo). Redirects are followed and the final URL is parsed; robots.txt is not
consulted.

  crawlq spider test spiders/demo.yaml http://127.0.0.1:8088/catalogue/item-3.html --allow-loopback
  crawlq spider test books.yaml https://books.example/ --json

A spec with proxies fetches through its first one, as a run's pages go through them in turn (its
${CRAWLQ_PROXY_...} variables filled from this environment, its password shown as xxxxx); --direct
fetches without it.

The fetcher refuses addresses that are not public unless the spec sets allow_private: true; a site
on this machine (crawlq demo-site, local development) needs --allow-loopback, as crawlq worker
does. --arg passes run arguments (base_url=... points the spider at another host and adds that
host to its allowed domains, as in a run).

Exit status: 0 when the page was fetched and parsed (dropped items are listed, not fatal); 1 for a
spec with mistakes (every one named by field path), a failed fetch (an HTTP status of 400 or more
included) or a page the parser cannot read; 2 for a usage error.`

func spiderTestCmd() *Command {
	return &Command{
		Name: "test", Synopsis: "fetch one page and show what the spider yields from it (items, links, errors), without a run",
		Usage: "SPEC URL [--json] [--allow-loopback] [--direct] [--arg k=v]... [--depth N] [--timeout D]",
		Args:  Args{Min: 2, Max: 2, Name: "SPEC and URL"},
		Help:  spiderTestHelp,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			asJSON := fs.Bool("json", false, "print one JSON object")
			loopback := fs.Bool("allow-loopback", false, "let the fetch reach a site on this machine (127.0.0.0/8, ::1); other non-public addresses stay refused unless the spec sets allow_private")
			args := kvFlag{}
			fs.Var(args, "arg", "run argument key=value (repeatable), e.g. base_url=http://127.0.0.1:8088")
			depth := fs.Int("depth", 0, "the depth the page is at in a run (0: a start page); max_depth applies to the links")
			timeout := fs.Duration("timeout", 30*time.Second, "bound on the whole fetch, redirects and body included")
			direct := fs.Bool("direct", false, "fetch directly, not through the spec's first proxy")
			return func(ctx context.Context, pos []string) error {
				if *depth < 0 {
					return usageErr("--depth must not be negative, got %d", *depth)
				}
				if *timeout <= 0 {
					return usageErr("--timeout must be positive, got %s", *timeout)
				}
				return spiderTest(ctx, env.Stdout, spiderTestParams{
					Spec: pos[0], URL: pos[1], Args: args, Depth: *depth, Timeout: *timeout,
					AllowLoopback: *loopback, JSON: *asJSON, Direct: *direct, ProxyEnv: envconfig.ProxyEnv(env.environ()),
				})
			}
		},
	}
}

type spiderTestParams struct {
	Spec, URL     string
	Args          map[string]string
	Depth         int
	Timeout       time.Duration
	AllowLoopback bool
	JSON          bool
	Direct        bool              // not through the spec's first proxy
	ProxyEnv      map[string]string // the CRAWLQ_PROXY_* variables its proxy URLs may name
}

// testReport is what spider test prints (--json: as is).
type testReport struct {
	Spider      string      `json:"spider"`
	URL         string      `json:"url"`
	Proxy       string      `json:"proxy,omitempty"` // the proxy the page came through, its password redacted
	FinalURL    string      `json:"final_url,omitempty"`
	Status      int         `json:"status,omitempty"`
	ContentType string      `json:"content_type,omitempty"`
	Bytes       int64       `json:"bytes"`
	Redirects   int         `json:"redirects"`
	ElapsedMS   int64       `json:"elapsed_ms"`
	Items       []testItem  `json:"items"`
	Follow      []testLink  `json:"follow"`
	Errors      []testError `json:"errors"`
	Stats       testStats   `json:"stats"`
	parsed      bool        // the page was fetched and parsed
}

type testItem struct {
	Key    string         `json:"key"`
	Fields map[string]any `json:"fields"`
}

type testLink struct {
	URL   string `json:"url"`
	Depth int    `json:"depth"`
}

// testError is one thing that went wrong: Kind is "fetch", "parse", "not_html" or
// "missing_field" (an item dropped; Rule, Container and Field say which).
type testError struct {
	Kind      string `json:"kind"`
	Message   string `json:"message"`
	Rule      *int   `json:"rule,omitempty"`
	Container int    `json:"container,omitempty"`
	Field     string `json:"field,omitempty"`
}

type testStats struct {
	Items      int `json:"items"`
	Dropped    int `json:"dropped"`
	Duplicates int `json:"duplicates"`
	Links      int `json:"links_seen"`
	Follow     int `json:"links_followed"`
	Filtered   int `json:"links_filtered"`
}

func spiderTest(ctx context.Context, w io.Writer, p spiderTestParams) error {
	sp, err := loadTestSpec(p.Spec)
	if err != nil {
		return err
	}
	if err := checkTestURL(p.URL); err != nil {
		return err
	}
	s, err := spider.Compile(sp)
	if err != nil {
		return fmt.Errorf("spec %s: %w", p.Spec, err)
	}
	if len(p.Args) > 0 {
		if s, err = spider.WithArgs(s, p.Args); err != nil {
			return fmt.Errorf("--arg: %w", err)
		}
	}
	settings := s.Settings().WithDefaults()
	rep := &testReport{Spider: s.Name(), URL: p.URL, Items: []testItem{}, Follow: []testLink{}, Errors: []testError{}}
	cfg := fetch.Config{UserAgent: settings.UserAgent, AllowPrivate: settings.AllowPrivate, AllowLoopback: p.AllowLoopback, ReadTimeout: p.Timeout}
	if len(settings.Proxies) > 0 && !p.Direct {
		var err error
		if cfg.Proxy, err = proxy.ParseExpanded(settings.Proxies[0], proxy.Lookup(p.ProxyEnv)); err != nil {
			return fmt.Errorf("spec %s: proxies[0]: %w", p.Spec, err)
		}
		rep.Proxy = cfg.Proxy.String()
	}
	f, err := fetch.New(cfg)
	if err != nil {
		return err
	}
	defer f.Close()
	res, ferr := f.Fetch(ctx, p.URL)
	if res != nil {
		rep.FinalURL, rep.Status, rep.ContentType, rep.Bytes, rep.Redirects, rep.ElapsedMS =
			res.URL, res.Status, res.ContentType, res.Bytes, res.Redirects, res.Elapsed.Milliseconds()
	}
	var failure error
	if ferr != nil {
		rep.Errors = append(rep.Errors, testError{Kind: "fetch", Message: ferr.Error()})
		failure = ferr
		if fetch.IsStatus(ferr) {
			failure = fmt.Errorf("fetch %s: %w", p.URL, ferr)
		}
	} else {
		result, perr := spider.ParseWithStats(ctx, s, &spider.Response{URL: res.URL, Status: res.Status, Header: res.Header, Body: res.Body, Depth: p.Depth})
		if perr != nil {
			rep.Errors = append(rep.Errors, testError{Kind: "parse", Message: perr.Error()})
			failure = perr
		} else {
			rep.parsed = true
			rep.add(sp, res, result)
		}
	}
	if p.JSON {
		err = writeJSON(w, rep)
	} else {
		err = rep.print(w)
	}
	if err != nil {
		return err
	}
	if failure != nil {
		return failure // after the report that shows it
	}
	return nil
}

// loadTestSpec reads and validates a spec file, or a built-in spec by name, and refuses command
// spiders (they run their own program; there is no parse to call).
func loadTestSpec(name string) (*spider.Spec, error) {
	data, err := os.ReadFile(name)
	source := name
	if errors.Is(err, fs.ErrNotExist) && !strings.ContainsAny(name, `/\.`) {
		if b, berr := fs.ReadFile(spiders.FS, name+".yaml"); berr == nil {
			data, err, source = b, nil, "built-in "+name+".yaml"
		}
	}
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	sp, err := spiderstore.Validate(data, source)
	if err != nil {
		return nil, specProblems(source, err)
	}
	if sp.IsCommand() {
		return nil, fmt.Errorf("spec %s: kind command runs its own program (%s); spider test parses pages with declarative specs only: run the command itself", source, strings.Join(sp.Command, " "))
	}
	return sp, nil
}

// specProblems lists a spec's mistakes one per line by field path, as spider push does.
func specProblems(source string, err error) error {
	var ve *spider.ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) == 0 {
		return fmt.Errorf("spec %s: %w", source, err)
	}
	lines := make([]string, len(ve.Errors))
	for i, fe := range ve.Errors {
		lines[i] = "  " + fe.String()
	}
	return fmt.Errorf("spec %s has %d problem(s):\n%s", source, len(lines), strings.Join(lines, "\n"))
}

func checkTestURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return usageErr("URL %q: %v", raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return usageErr("URL %q: want an absolute http:// or https:// URL", raw)
	case u.Host == "":
		return usageErr("URL %q: no host", raw)
	}
	return nil
}

// add records a parse's items, links and drops.
func (r *testReport) add(sp *spider.Spec, res *fetch.Result, result spider.Result) {
	for _, it := range result.Items {
		r.Items = append(r.Items, testItem{Key: it.Key, Fields: it.Fields})
	}
	for _, l := range result.Follow {
		r.Follow = append(r.Follow, testLink{URL: l.URL, Depth: l.Depth})
	}
	for _, d := range result.Dropped {
		rule := d.Rule
		where := fmt.Sprintf("items[%d]", d.Rule)
		if d.Rule < len(sp.Items) && sp.Items[d.Rule].CSS != "" {
			where += fmt.Sprintf(" (css %q) match %d", sp.Items[d.Rule].CSS, d.Container)
		}
		r.Errors = append(r.Errors, testError{Kind: "missing_field", Rule: &rule, Container: d.Container, Field: d.Field,
			Message: fmt.Sprintf("%s: item dropped: required field %q is missing or empty (items[%d].fields.%s)", where, d.Field, d.Rule, d.Field)})
	}
	if !htmlType(res.ContentType) {
		r.Errors = append(r.Errors, testError{Kind: "not_html", Message: fmt.Sprintf("content type %q is not HTML or XML: a declarative spider reads nothing from it", res.ContentType)})
	}
	st := result.Stats
	r.Stats = testStats{Items: len(result.Items), Dropped: st.Dropped, Duplicates: st.Duplicates, Links: st.Links, Follow: len(result.Follow), Filtered: st.Filtered}
}

func htmlType(ct string) bool {
	switch ct {
	case "", "text/html", "application/xhtml+xml", "text/xml", "application/xml":
		return true
	}
	return false
}

func (r *testReport) print(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "spider %s: GET %s", r.Spider, r.URL)
	if r.Proxy != "" {
		fmt.Fprintf(&b, " through %s", r.Proxy)
	}
	b.WriteString("\n")
	if r.Status != 0 {
		fmt.Fprintf(&b, "  %d %s, %d bytes in %d ms", r.Status, r.ContentType, r.Bytes, r.ElapsedMS)
		if r.Redirects > 0 {
			fmt.Fprintf(&b, ", %d redirect(s) to %s", r.Redirects, r.FinalURL)
		}
		b.WriteString("\n")
	}
	if !r.parsed {
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "  %s\n", e.Message)
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "\nItems (%d):\n", len(r.Items))
	for _, it := range r.Items {
		j, err := json.Marshal(it)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "  %s\n", j)
	}
	fmt.Fprintf(&b, "\nLinks to follow (%d):\n", len(r.Follow))
	for _, l := range r.Follow {
		fmt.Fprintf(&b, "  %s  (depth %d)\n", l.URL, l.Depth)
	}
	fmt.Fprintf(&b, "\nErrors (%d):\n", len(r.Errors))
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "  %s\n", e.Message)
	}
	s := r.Stats
	fmt.Fprintf(&b, "\n%d item(s), %d dropped, %d duplicate(s); %d link(s) seen, %d to follow, %d filtered\n",
		s.Items, s.Dropped, s.Duplicates, s.Links, s.Follow, s.Filtered)
	_, err := io.WriteString(w, b.String())
	return err
}
