// Package spider owns spider kinds: the Spider interface that Go spiders implement, the
// declarative spec (YAML/JSON) compiled into a Spider, command spiders (an argv run by
// the ECS runner), and the Registry that names them. It fetches nothing: the crawl
// package feeds it Responses and turns its Requests into page jobs. Declarative specs
// extract from the HTML token stream when their selectors and the page allow it
// (stream.go), and from a DOM otherwise, with the same results.
package spider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"crawlq/internal/urlx"
)

// DefaultUserAgent is the User-Agent sent when Settings.UserAgent is empty.
const DefaultUserAgent = "crawlq/1.0 (+https://github.com/crawlq)"

const (
	RuntimeLambda = "lambda"
	RuntimeECS    = "ecs"
	// RenderHTTP and RenderBrowser are the ways a page is fetched (Settings.Render).
	RenderHTTP    = "http"
	RenderBrowser = "browser"
	// DefaultQueue is the queue a spider's page jobs go to when Settings.Queue is empty.
	DefaultQueue = "crawl"
	// MaxConcurrency is the largest per-domain concurrency a spider may ask for.
	MaxConcurrency = 64
)

var (
	// ErrUnknownSpider is returned by Registry.Lookup for a name nobody registered.
	ErrUnknownSpider = errors.New("unknown spider")
	// ErrUnknownVersion is returned by Registry.Resolve for a version of a spider that is not
	// stored.
	ErrUnknownVersion = errors.New("unknown version")
	// ErrUnusableSpider is returned (with ErrUnknownSpider) for a stored spec that no longer
	// compiles, such as one stored before a check it fails was added.
	ErrUnusableSpider = errors.New("stored spec is not usable")
	// ErrDuplicate is returned when a name is registered twice.
	ErrDuplicate = errors.New("duplicate spider")
	// ErrCommandSpider is returned by Registry.Lookup and Compile for command spiders,
	// which are not run in-process: use Registry.Command and the ECS runner.
	ErrCommandSpider = errors.New("command spider")
	// ErrBadPage is returned by Parse for a page that cannot be parsed (HTML nested
	// deeper than the parser allows, a relative response URL). Retrying will not help.
	ErrBadPage = errors.New("unparseable page")
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Request is a page to fetch.
type Request struct {
	URL   string // canonical (urlx.Canonical)
	Depth int    // 0 for start requests
	// Render, when set, is how this page is fetched ("http" or "browser") instead of
	// Settings.Render: a declarative spider's follow rule's render.
	Render string
}

// Response is a fetched page handed to Spider.Parse.
type Response struct {
	URL    string // final URL, after redirects
	Status int    // HTTP status; 0 is treated as 200
	Header http.Header
	Body   []byte // UTF-8 (the fetcher transcodes); invalid sequences are tolerated
	Depth  int    // depth of the request that fetched it
}

// Item is one scraped record.
type Item struct {
	Key    string // unique within a run; a later item with the same key replaces it
	Fields map[string]any
}

// Settings is how a spider wants to be crawled. The zero value of each field means its
// default, except ObeyRobots, whose zero value is false: Go spiders should start from
// DefaultSettings().
type Settings struct {
	AllowedDomains   []string      // hosts (and their subdomains) links may be followed to; default: none beyond what the spider filters itself
	MaxPages         int           // pages fetched per run; default 0 = unlimited
	MaxDepth         int           // link depth from the start requests; default 0 = unlimited
	Delay            time.Duration // minimum gap between requests to one domain; default 0
	Concurrency      int           // requests in flight per domain; default 1, at most 64
	UserAgent        string        // default DefaultUserAgent
	ObeyRobots       bool          // honour robots.txt; default true (via DefaultSettings and specs)
	Runtime          string        // "lambda" (default) or "ecs"
	Queue            string        // queue for the spider's page jobs; default "crawl"
	AllowPrivate     bool          // may fetch addresses that are not public: loopback, private (RFC 1918), CGNAT, benchmarking, unique local, link-local, cloud metadata, multicast and reserved (fetch.Config.AllowPrivate); default false: refused when dialed
	Retry            Retry         // page retries, host pauses and the dead-page limit (retry.go); defaults there
	Render           string        // "http" (default: a plain fetch) or "browser" (headless Chromium, runtime ecs only)
	WaitFor          string        // with Render browser: "" (load), "networkidle", a duration or a CSS selector
	Scroll           bool          // with Render browser: scroll each page to its bottom (lazy lists) first
	Proxies          []string      // proxy URLs requests rotate through (internal/proxy; ${CRAWLQ_PROXY_...} filled from the runner's environment); default none: direct
	ProxyDelay       time.Duration // minimum gap between requests through one proxy, shared by every worker (its requests are then serial); default 0
	ProxyConcurrency int           // requests in flight through one proxy from each worker process; default 0: no bound but the workers', at most MaxProxyConcurrency
	RulesRender      bool          // some pages are rendered by their follow rule's render: browser (declarative spiders); wait_for and scroll apply to them
	Sessions         int           // visitors the crawl is split into, each a cookie jar (and proxy) its pages' follow-ups keep; a banned one is retired; default 0: no cookies kept, at most MaxSessions
	Ban              Ban           // what a banned page looks like, retried through another proxy (proxies.go); default: nothing is a ban
	Revisit          string        // "always" (default, also ""), "changed_only" or "adaptive" (revisit.go)
	RevisitMin       time.Duration // with Revisit adaptive: the shortest revisit interval; default 1h
	RevisitMax       time.Duration // with Revisit adaptive: the longest revisit interval; default 168h
	StateTTL         time.Duration // URL state no run reached for this long is removed; default 720h
	// Sitemaps are sitemap URLs whose URLs start every run besides its start requests; with
	// SitemapsFromRobots also those the robots.txt of each start request's site names; with
	// SitemapSince "last_run" only the URLs whose lastmod is later than the last good run's
	// start (sitemaps.go). Default none.
	Sitemaps           []string
	SitemapsFromRobots bool
	SitemapSince       string
}

// DefaultSettings returns the settings a spider gets when it says nothing.
func DefaultSettings() Settings {
	return Settings{Concurrency: 1, UserAgent: DefaultUserAgent, ObeyRobots: true, Runtime: RuntimeLambda, Queue: DefaultQueue}
}

// WithDefaults fills every zero field that has a default (all but ObeyRobots).
func (s Settings) WithDefaults() Settings {
	if s.Concurrency == 0 {
		s.Concurrency = 1
	}
	if s.UserAgent == "" {
		s.UserAgent = DefaultUserAgent
	}
	if s.Runtime == "" {
		s.Runtime = RuntimeLambda
	}
	if s.Queue == "" {
		s.Queue = DefaultQueue
	}
	s.Retry = s.Retry.WithDefaults()
	if s.Ban.Detects() && s.Ban.Retries == 0 {
		s.Ban.Retries = DefaultBanRetries
	}
	return s
}

// Validate reports the first bad field, by name. Zero values that have defaults are fine.
func (s Settings) Validate() error {
	errs := s.fieldErrors("")
	if len(errs) > 0 {
		return &ValidationError{Errors: errs}
	}
	return nil
}

func (s Settings) fieldErrors(prefix string) []FieldError {
	var errs []FieldError
	add := func(path, msg string) { errs = append(errs, FieldError{Path: prefix + path, Msg: msg}) }
	for i, d := range s.AllowedDomains {
		if msg := checkDomain(d); msg != "" {
			add(fmt.Sprintf("allowed_domains[%d]", i), msg)
		} else if !s.AllowPrivate && urlx.IsLinkLocal(d) {
			add(fmt.Sprintf("allowed_domains[%d]", i), fmt.Sprintf("link-local/metadata host %q not allowed (set allow_private: true)", d))
		}
	}
	if s.MaxPages < 0 {
		add("max_pages", "negative")
	}
	if s.MaxDepth < 0 {
		add("max_depth", "negative")
	}
	if s.Delay < 0 {
		add("delay", "negative")
	}
	if s.Concurrency < 0 || s.Concurrency > MaxConcurrency {
		add("concurrency", fmt.Sprintf("%d out of range 1..%d", s.Concurrency, MaxConcurrency))
	}
	if strings.ContainsFunc(s.UserAgent, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		add("user_agent", "contains control characters")
	}
	switch s.Runtime {
	case "", RuntimeLambda, RuntimeECS:
	default:
		add("runtime", fmt.Sprintf("%q is not one of lambda, ecs", s.Runtime))
	}
	if s.Queue != "" && !nameRE.MatchString(s.Queue) {
		add("queue", fmt.Sprintf("%q does not match %s", s.Queue, nameRE))
	}
	switch s.Render {
	case "", RenderHTTP:
		if s.RulesRender {
			if msg := checkWaitFor(s.WaitFor); msg != "" {
				add("wait_for", msg)
			}
			break
		}
		if s.WaitFor != "" {
			add("wait_for", "needs render: browser")
		}
		if s.Scroll {
			add("scroll", "needs render: browser")
		}
	case RenderBrowser:
		if s.Runtime == RuntimeLambda {
			add("render", "browser pages are rendered by Chromium on the ECS runners, not in Lambda: set runtime: ecs (or leave runtime out)")
		}
		if msg := checkWaitFor(s.WaitFor); msg != "" {
			add("wait_for", msg)
		}
	default:
		add("render", fmt.Sprintf("%q is not one of http, browser", s.Render))
	}
	proxiesErrors(s.Proxies, s.AllowPrivate, add)
	proxyPolitenessErrors(s, add)
	if s.Sessions < 0 || s.Sessions > MaxSessions {
		add("sessions", fmt.Sprintf("%d out of range 0..%d", s.Sessions, MaxSessions))
	}
	s.Ban.fieldErrors(add)
	errs = append(errs, s.Retry.fieldErrors(prefix+"retry.")...)
	errs = append(errs, revisitErrors(s, prefix)...)
	return errs
}

// checkDomain returns why d is not a bare host name or IP address, or "".
func checkDomain(d string) string {
	if d == "" {
		return "empty"
	}
	if strings.ContainsAny(d, "/:@?#") && !strings.HasPrefix(d, "[") {
		if strings.Contains(d, "://") {
			return fmt.Sprintf("%q must be a host name, not a URL", d)
		}
		return fmt.Sprintf("%q must be a host name without port or path", d)
	}
	if h := urlx.Hostname("http://" + d + "/"); h == "" {
		return fmt.Sprintf("%q is not a valid host name", d)
	}
	return ""
}

// Spider is a crawl definition: where to start and how to read a page.
type Spider interface {
	Name() string
	Settings() Settings
	// StartRequests returns the first pages to fetch, given the run's arguments.
	StartRequests(ctx context.Context, args map[string]string) ([]Request, error)
	// Parse reads one page. Follow URLs are canonical, their Depth is resp.Depth+1, and
	// they are already filtered by AllowedDomains and MaxDepth.
	Parse(ctx context.Context, resp *Response) (items []Item, follow []Request, err error)
}

// ArgBinder is implemented by spiders whose behaviour depends on the run's arguments
// beyond StartRequests (declarative spiders: base_url widens AllowedDomains). The crawl
// binds the spider to a run's args before parsing any of its pages.
type ArgBinder interface {
	WithArgs(args map[string]string) (Spider, error)
}

// WithArgs returns s bound to a run's arguments (s itself if it does not care).
func WithArgs(s Spider, args map[string]string) (Spider, error) {
	if b, ok := s.(ArgBinder); ok {
		return b.WithArgs(args)
	}
	return s, nil
}

// ExtractStats counts what one Parse did beyond its results.
type ExtractStats struct {
	Dropped    int // items dropped for a missing required field or empty key
	Duplicates int // items dropped because an earlier item on the page had the same key
	Links      int // candidate links seen
	Filtered   int // links rejected (bad scheme, domain, deny, pattern, depth, duplicate)
}

// Result is Parse's output with its statistics.
type Result struct {
	Items  []Item
	Follow []Request
	Stats  ExtractStats
	// Dropped says why each item counted in Stats.Dropped was dropped, so a person testing a
	// spec against a page (crawlq spider test) learns which field is missing where.
	Dropped []Dropped
}

// Dropped is an item dropped for a missing or empty required field (its key included).
type Dropped struct {
	Rule      int    // index of the item rule in the spec's items
	Container int    // 1-based position of the container among the rule's matches on the page
	Field     string // the first required field found missing or empty
	Key       bool   // Field is the rule's key: the item had no key
}

// StatsParser is implemented by spiders that can report ExtractStats.
type StatsParser interface {
	ParseStats(ctx context.Context, resp *Response) (Result, error)
}

// ParseWithStats parses resp with s, including statistics when s can report them.
func ParseWithStats(ctx context.Context, s Spider, resp *Response) (Result, error) {
	if sp, ok := s.(StatsParser); ok {
		return sp.ParseStats(ctx, resp)
	}
	items, follow, err := s.Parse(ctx, resp)
	return Result{Items: items, Follow: follow}, err
}

// CommandSpec is an external program that crawls by itself (scrapy and friends), run by
// the ECS runner.
type CommandSpec struct {
	Command []string          // argv template; "{spider}" is replaced by the spider name, e.g. ["scrapy","crawl","{spider}"]
	Dir     string            // working directory; default the runner's
	Env     map[string]string // extra environment; default none
	Timeout time.Duration     // kill after; default 0 = the runner's limit
}

// Argv returns Command with "{spider}" replaced by name.
func (c CommandSpec) Argv(name string) []string {
	out := make([]string, len(c.Command))
	for i, a := range c.Command {
		out[i] = strings.ReplaceAll(a, "{spider}", name)
	}
	return out
}

// FieldError is one mistake in a spec, at a field path like "items[0].fields.price.css".
type FieldError struct {
	Path string
	Msg  string
}

func (e FieldError) String() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// ValidationError lists every mistake found in a spec or settings.
type ValidationError struct {
	Source string // file name or other origin; may be empty
	Errors []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		parts[i] = fe.String()
	}
	msg := strings.Join(parts, "; ")
	if e.Source != "" {
		return "invalid spider " + e.Source + ": " + msg
	}
	return "invalid spider: " + msg
}
