package spider

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/andybalholm/cascadia"
	"gopkg.in/yaml.v3"

	"crawlq/internal/urlx"
)

const (
	KindDeclarative = "declarative"
	KindCommand     = "command"
)

// Spec is a spider file (YAML, or JSON, which is YAML). See spiders/demo.yaml.
type Spec struct {
	Source string `yaml:"-"` // where it was read from, for error messages

	Name           string       `yaml:"name"`
	Kind           string       `yaml:"kind"`            // "declarative" (default) or "command"
	StartURLs      []string     `yaml:"start_urls"`      // absolute http(s); required for declarative spiders
	AllowedDomains []string     `yaml:"allowed_domains"` // default: the hosts of start_urls
	Follow         []FollowRule `yaml:"follow"`
	Items          []ItemRule   `yaml:"items"`
	MaxPages       int          `yaml:"max_pages"`     // default 0 = unlimited
	MaxDepth       int          `yaml:"max_depth"`     // default 0 = unlimited
	Delay          string       `yaml:"delay"`         // Go duration, default "0s"
	Concurrency    int          `yaml:"concurrency"`   // default 1, at most 64
	UserAgent      string       `yaml:"user_agent"`    // default DefaultUserAgent
	ObeyRobots     *bool        `yaml:"obey_robots"`   // default true
	Runtime        string       `yaml:"runtime"`       // "lambda" (default) or "ecs" (the default of command spiders)
	Queue          string       `yaml:"queue"`         // default "crawl"
	AllowPrivate   bool         `yaml:"allow_private"` // may fetch non-public addresses (loopback, private, link-local, metadata); default false
	Retry          *RetrySpec   `yaml:"retry"`         // page retries and host pauses; see Retry
	// Render is how pages are fetched: "http" (default) or "browser" (rendered by headless
	// Chromium on the ECS runners: the default runtime of such a spider is ecs, and lambda is
	// refused).
	Render string `yaml:"render"`
	// WaitFor, with render: browser, is what a rendered page waits for before it is read: ""
	// (the load event), "networkidle", a Go duration, or a CSS selector.
	WaitFor string `yaml:"wait_for"`
	// Scroll, with render: browser, scrolls each page to its bottom until it stops growing
	// (lazy lists) before it is read.
	Scroll bool `yaml:"scroll"`
	// Proxies are the proxies the spider's requests rotate through (http://, https://,
	// socks5://; credentials as ${CRAWLQ_PROXY_...} from the runner's environment); default none.
	Proxies []string `yaml:"proxies"`
	// ProxyDelay is the least gap between requests through one proxy, across every worker (Go
	// duration); default "0s".
	ProxyDelay string `yaml:"proxy_delay"`
	// ProxyConcurrency bounds the requests in flight through one proxy from each worker process;
	// default 0: no bound but the workers'.
	ProxyConcurrency int `yaml:"proxy_concurrency"`
	// Sessions, when set, crawls as that many visitors, each with its own cookies (and proxy);
	// see Settings.Sessions. Default 0: no cookies kept.
	Sessions int `yaml:"sessions"`
	// Ban is what a banned page looks like; see Ban.
	Ban      *BanSpec  `yaml:"ban"`
	Monitors *Monitors `yaml:"monitors"` // checks on each run's outcome (monitors.go); default none
	// Revisit is how a run treats pages earlier runs fetched: "always" (default), "changed_only"
	// or "adaptive" (revisit.go, docs/recrawl.md).
	Revisit string `yaml:"revisit"`
	// RevisitInterval bounds an adaptive revisit; default min 1h, max 168h.
	RevisitInterval *RevisitSpec `yaml:"revisit_interval"`
	// StateTTL is how long a URL's state is kept when no run reaches it (Go duration); default 720h.
	StateTTL string `yaml:"state_ttl"`
	// Sitemaps are start points besides start_urls (sitemaps.go); default none.
	Sitemaps *SitemapSpec `yaml:"sitemaps"`

	// Command spiders only.
	Command []string          `yaml:"command"` // argv; "{spider}" is replaced by the name
	Dir     string            `yaml:"dir"`
	Env     map[string]string `yaml:"env"`
	Timeout string            `yaml:"timeout"` // Go duration, default 0 = the runner's limit
}

// FollowRule selects links to follow. A link is followed if any rule accepts it.
type FollowRule struct {
	// CSS selects link elements: the href of each match, or of the a/area elements with
	// an href inside a match that has none. Default: every a[href] and area[href].
	CSS string `yaml:"css"`
	// Pattern must match the absolute canonical URL (Go regexp, unanchored).
	Pattern string `yaml:"pattern"`
	// Deny rejects absolute canonical URLs it matches.
	Deny string `yaml:"deny"`
	// Render is how the pages of the links this rule accepts are fetched: "http" or "browser";
	// default the spider's render. A link two rules accept takes the first's.
	Render string `yaml:"render"`
}

// ItemRule extracts items from pages.
type ItemRule struct {
	Match  string               `yaml:"match"` // regexp on the page's final URL; default every page
	CSS    string               `yaml:"css"`   // one item per matching container; default one per page
	Key    string               `yaml:"key"`   // name of the field whose value is Item.Key (implicitly required)
	Fields map[string]FieldRule `yaml:"fields"`
}

// FieldRule extracts one field from the first element matching CSS inside the container.
type FieldRule struct {
	CSS string `yaml:"css"` // default: the container itself
	// Attr is "text" (default: trimmed, whitespace collapsed), "html" (inner HTML), or an
	// attribute name; href and src are resolved to absolute canonical URLs.
	Attr     string `yaml:"attr"`
	Required bool   `yaml:"required"`
}

var (
	fieldNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	attrRE      = regexp.MustCompile(`^[A-Za-z_:][-A-Za-z0-9_:.]{0,63}$`)
	envRE       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	yamlLineRE  = regexp.MustCompile(`^line (\d+): (.*)$`)
)

// ParseSpec decodes and validates a spec. source names it in errors (a file name). Every
// mistake is reported, as a *ValidationError.
func ParseSpec(data []byte, source string) (*Spec, error) {
	if len(data) > maxSpecBytes {
		return nil, &ValidationError{Source: source, Errors: []FieldError{{Msg: fmt.Sprintf("larger than %d bytes", maxSpecBytes)}}}
	}
	var spec Spec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(&spec)
	if errors.Is(err, io.EOF) {
		return nil, &ValidationError{Source: source, Errors: []FieldError{{Msg: "empty spec"}}}
	}
	typed := typeErrors{validate: true}
	if err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, &ValidationError{Source: source, Errors: []FieldError{syntaxProblem(err)}}
		}
		typed = nameTypeErrors(te, data)
	}
	errs := typed.errs
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		errs = append(errs, FieldError{Msg: "more than one YAML document"})
	}
	spec.Source = source
	if typed.validate {
		errs = append(errs, spec.validateOutside(typed.scopes)...)
	}
	if len(errs) > 0 {
		return nil, &ValidationError{Source: source, Errors: errs}
	}
	return &spec, nil
}

// validateOutside is validate's errors but those inside scopes (fields a bad value left unset).
func (s *Spec) validateOutside(scopes []string) []FieldError {
	var errs []FieldError
next:
	for _, fe := range s.validate() {
		for _, sc := range scopes {
			if inScope(fe.Path, sc) {
				continue next
			}
		}
		errs = append(errs, fe)
	}
	return errs
}

// Validate checks the spec, reporting every mistake as a *ValidationError.
func (s *Spec) Validate() error {
	if errs := s.validate(); len(errs) > 0 {
		return &ValidationError{Source: s.Source, Errors: errs}
	}
	return nil
}

// IsCommand reports whether the spec declares a command spider.
func (s *Spec) IsCommand() bool { return s.Kind == KindCommand }

// Settings returns the crawl settings the spec declares, defaults filled in.
func (s *Spec) Settings() (Settings, error) {
	if err := s.Validate(); err != nil {
		return Settings{}, err
	}
	return s.settings(), nil
}

// CommandSpec returns the command a command spider runs.
func (s *Spec) CommandSpec() (CommandSpec, error) {
	if err := s.Validate(); err != nil {
		return CommandSpec{}, err
	}
	if !s.IsCommand() {
		return CommandSpec{}, fmt.Errorf("command spec %s: kind is %q, not command", s.Name, s.kind())
	}
	timeout, _ := time.ParseDuration(orZero(s.Timeout))
	env := make(map[string]string, len(s.Env))
	for k, v := range s.Env {
		env[k] = v
	}
	return CommandSpec{Command: append([]string(nil), s.Command...), Dir: s.Dir, Env: env, Timeout: timeout}, nil
}

func (s *Spec) kind() string {
	if s.Kind == "" {
		return KindDeclarative
	}
	return s.Kind
}

// settings assumes a valid spec.
func (s *Spec) settings() Settings {
	delay, _ := time.ParseDuration(orZero(s.Delay))
	proxyDelay, _ := time.ParseDuration(orZero(s.ProxyDelay))
	st := Settings{
		AllowedDomains:   s.allowedDomains(),
		MaxPages:         s.MaxPages,
		MaxDepth:         s.MaxDepth,
		Delay:            delay,
		Concurrency:      s.Concurrency,
		UserAgent:        s.UserAgent,
		ObeyRobots:       s.ObeyRobots == nil || *s.ObeyRobots,
		Runtime:          s.Runtime,
		Queue:            s.Queue,
		AllowPrivate:     s.AllowPrivate,
		Retry:            s.Retry.retry(),
		Render:           s.Render,
		WaitFor:          s.WaitFor,
		Scroll:           s.Scroll,
		Proxies:          append([]string(nil), s.Proxies...),
		ProxyDelay:       proxyDelay,
		ProxyConcurrency: s.ProxyConcurrency,
		Ban:              s.Ban.ban(),
		Sessions:         s.Sessions,
		RulesRender:      s.rulesRender(),
	}
	s.revisitSettings(&st)
	s.sitemapSettings(&st)
	if (s.Render == RenderBrowser || s.rulesRender()) && st.Runtime == "" {
		st.Runtime = RuntimeECS // Chromium runs on the runners only
	}
	if s.IsCommand() && st.Runtime == "" {
		// A command runs only on the runners: left to WithDefaults it would be a Lambda spider,
		// queued where nothing can start it.
		st.Runtime = RuntimeECS
	}
	return st.WithDefaults()
}

// rulesRender reports whether a follow rule renders its pages with the browser.
func (s *Spec) rulesRender() bool {
	for _, f := range s.Follow {
		if f.Render == RenderBrowser {
			return true
		}
	}
	return false
}

// allowedDomains returns the normalised allowed domains, or the start URLs' hosts when
// none are given: a spider that names no domains stays on the sites it starts from.
func (s *Spec) allowedDomains() []string {
	var out []string
	add := func(h string) {
		for _, d := range out {
			if d == h {
				return
			}
		}
		out = append(out, h)
	}
	for _, d := range s.AllowedDomains {
		if h := urlx.Hostname("http://" + d + "/"); h != "" {
			add(strings.Trim(h, "[]"))
		}
	}
	if len(s.AllowedDomains) == 0 {
		for _, u := range s.StartURLs {
			if h := urlx.Hostname(u); h != "" {
				add(strings.Trim(h, "[]"))
			}
		}
	}
	return out
}

func orZero(d string) string {
	if d == "" {
		return "0s"
	}
	return d
}

// validate checks every field of the spec; it returns each error found, in the spec's order.
func (s *Spec) validate() []FieldError {
	var e fieldErrs
	s.checkName(&e)
	kind := s.checkKind(&e)
	s.checkStartURLs(&e, kind)
	e = append(e, s.settingsErrors()...)
	s.checkFollow(&e)
	s.checkItems(&e)
	s.checkKindFields(&e, kind)
	e = append(e, s.monitorErrors()...)
	s.checkStrings(&e)
	return e
}

// fieldErrs collects a spec's field errors in the order they are found.
type fieldErrs []FieldError

func (e *fieldErrs) add(path, format string, a ...any) {
	*e = append(*e, FieldError{Path: path, Msg: fmt.Sprintf(format, a...)})
}

func (s *Spec) checkName(e *fieldErrs) {
	if !nameRE.MatchString(s.Name) {
		if s.Name == "" {
			e.add("name", "required")
		} else {
			e.add("name", "%q does not match %s", s.Name, nameRE)
		}
	}
}

// checkKind checks kind and returns it (its default applied).
func (s *Spec) checkKind(e *fieldErrs) string {
	kind := s.kind()
	switch kind {
	case KindDeclarative, KindCommand:
	default:
		e.add("kind", "%q is not one of declarative, command", s.Kind)
	}
	return kind
}

// checkStartURLs checks that each start URL is an absolute http(s) URL on allowed_domains, and
// not link-local unless allow_private.
func (s *Spec) checkStartURLs(e *fieldErrs, kind string) {
	if len(s.StartURLs) == 0 && kind == KindDeclarative {
		e.add("start_urls", "at least one start URL is required")
	}
	domains := s.allowedDomains()
	for i, raw := range s.StartURLs {
		path := fmt.Sprintf("start_urls[%d]", i)
		c, err := urlx.Canonical(raw)
		switch {
		case errors.Is(err, urlx.ErrScheme):
			e.add(path, "scheme %q not allowed (http or https only)", schemeOf(raw))
			continue
		case errors.Is(err, urlx.ErrTooLong):
			e.add(path, "longer than %d bytes", urlx.MaxLen)
			continue
		case err != nil:
			e.add(path, "%q is not an absolute http(s) URL", truncate(raw))
			continue
		}
		host := urlx.Hostname(c)
		if !s.AllowPrivate && urlx.IsLinkLocal(host) {
			e.add(path, "link-local/metadata host %q not allowed (set allow_private: true)", host)
		}
		if len(s.AllowedDomains) > 0 && !urlx.InDomains(host, domains) {
			e.add(path, "host %q is not inside allowed_domains", host)
		}
	}
}

// settingsErrors checks the spec's settings through the Settings they become (Settings.fieldErrors),
// and the fields Settings holds parsed: the revisit's, sitemaps, delays and retry.
func (s *Spec) settingsErrors() []FieldError {
	// delay parsed here because Settings holds a time.Duration.
	st := Settings{
		AllowedDomains: s.AllowedDomains, MaxPages: s.MaxPages, MaxDepth: s.MaxDepth,
		Concurrency: s.Concurrency, UserAgent: s.UserAgent, Runtime: s.Runtime, Queue: s.Queue,
		AllowPrivate: s.AllowPrivate, Render: s.Render, WaitFor: s.WaitFor, Scroll: s.Scroll,
		Proxies: s.Proxies, ProxyConcurrency: s.ProxyConcurrency, Ban: s.Ban.ban(), Sessions: s.Sessions,
	}
	if d, err := time.ParseDuration(orZero(s.ProxyDelay)); err == nil && d > 0 {
		st.ProxyDelay = d
	}
	st.RulesRender = s.rulesRender()
	var errs []FieldError
	if dur := s.specRevisitErrors(); len(dur) > 0 {
		errs = append(errs, dur...)
	} else {
		s.revisitSettings(&st)
	}
	errs = append(errs, st.fieldErrors("")...)
	errs = append(errs, s.Sitemaps.validate()...)
	errs = append(errs, checkDuration("delay", s.Delay)...)
	errs = append(errs, checkDuration("proxy_delay", s.ProxyDelay)...)
	return append(errs, s.Retry.validate()...)
}

// checkFollow checks each follow rule: a selector or pattern, valid CSS and regexps, a render
// Lambda can do.
func (s *Spec) checkFollow(e *fieldErrs) {
	for i, f := range s.Follow {
		path := fmt.Sprintf("follow[%d]", i)
		if f.CSS == "" && f.Pattern == "" {
			e.add(path, "needs css and/or pattern")
		}
		*e = append(*e, checkCSS(path+".css", f.CSS)...)
		*e = append(*e, checkRegexp(path+".pattern", f.Pattern)...)
		*e = append(*e, checkRegexp(path+".deny", f.Deny)...)
		switch f.Render {
		case "", RenderHTTP:
		case RenderBrowser:
			if s.Runtime == RuntimeLambda {
				e.add(path+".render", "browser pages are rendered by Chromium on the ECS runners, not in Lambda: set runtime: ecs (or leave runtime out)")
			}
		default:
			e.add(path+".render", "%q is not one of http, browser", f.Render)
		}
	}
}

// checkItems checks each item rule: its match and container, its fields and its key among them.
func (s *Spec) checkItems(e *fieldErrs) {
	for i, it := range s.Items {
		path := fmt.Sprintf("items[%d]", i)
		*e = append(*e, checkRegexp(path+".match", it.Match)...)
		*e = append(*e, checkCSS(path+".css", it.CSS)...)
		if len(it.Fields) == 0 {
			e.add(path+".fields", "at least one field is required")
		}
		if it.Key == "" {
			e.add(path+".key", "required")
		} else if _, ok := it.Fields[it.Key]; !ok && len(it.Fields) > 0 {
			e.add(path+".key", "field %q is not in fields", it.Key)
		}
		for _, name := range sortedKeys(it.Fields) {
			f := it.Fields[name]
			fpath := path + ".fields." + name
			if !fieldNameRE.MatchString(name) {
				e.add(path+".fields", "field name %q does not match %s", truncate(name), fieldNameRE)
				fpath = fmt.Sprintf("%s.fields[%q]", path, truncate(name))
			}
			*e = append(*e, checkCSS(fpath+".css", f.CSS)...)
			if f.Attr != "" && !attrRE.MatchString(f.Attr) {
				e.add(fpath+".attr", "%q is not text, html or an attribute name", truncate(f.Attr))
			}
		}
	}
}

// checkKindFields checks the fields of a command spider (command, timeout, env), and that each
// kind sets none of the other's.
func (s *Spec) checkKindFields(e *fieldErrs, kind string) {
	switch kind {
	case KindCommand:
		if len(s.Command) == 0 || s.Command[0] == "" {
			e.add("command", "required for kind command")
		}
		*e = append(*e, checkDuration("timeout", s.Timeout)...)
		for _, k := range sortedKeys(s.Env) {
			if !envRE.MatchString(k) {
				e.add("env", "%q is not a valid environment variable name", truncate(k))
			}
		}
		if len(s.Follow) > 0 {
			e.add("follow", "only for kind declarative")
		}
		if len(s.Items) > 0 {
			e.add("items", "only for kind declarative")
		}
	case KindDeclarative:
		if len(s.Command) > 0 {
			e.add("command", "only for kind command")
		}
		if s.Dir != "" {
			e.add("dir", "only for kind command")
		}
		if len(s.Env) > 0 {
			e.add("env", "only for kind command")
		}
		if s.Timeout != "" {
			e.add("timeout", "only for kind command")
		}
	}
}

// checkStrings refuses file:// URLs and metadata hosts anywhere else (command arguments, env,
// patterns...).
func (s *Spec) checkStrings(e *fieldErrs) {
	for _, sv := range s.strings() {
		low := strings.ToLower(sv.value)
		if strings.Contains(low, "file://") && !strings.HasPrefix(sv.path, "start_urls[") {
			e.add(sv.path, "file:// URLs are not allowed")
		}
		if !s.AllowPrivate && sv.scanPrivate {
			for _, bad := range []string{"169.254.", "fd00:ec2::254", "metadata.google.internal"} {
				if strings.Contains(low, bad) {
					e.add(sv.path, "link-local/metadata address %q not allowed (set allow_private: true)", bad)
					break
				}
			}
		}
	}
}

type stringValue struct {
	path        string
	value       string
	scanPrivate bool // start URLs and allowed domains are checked precisely elsewhere
}

// strings lists every string in the spec with its path.
func (s *Spec) strings() []stringValue {
	var out []stringValue
	add := func(path, v string, scan bool) {
		if v != "" {
			out = append(out, stringValue{path, v, scan})
		}
	}
	for i, v := range s.StartURLs {
		add(fmt.Sprintf("start_urls[%d]", i), v, false)
	}
	for i, v := range s.AllowedDomains {
		add(fmt.Sprintf("allowed_domains[%d]", i), v, false)
	}
	for i, f := range s.Follow {
		add(fmt.Sprintf("follow[%d].pattern", i), f.Pattern, false)
		add(fmt.Sprintf("follow[%d].deny", i), f.Deny, false)
	}
	for i, it := range s.Items {
		add(fmt.Sprintf("items[%d].match", i), it.Match, false)
	}
	add("user_agent", s.UserAgent, false)
	for i, v := range s.Command {
		add(fmt.Sprintf("command[%d]", i), v, true)
	}
	add("dir", s.Dir, false)
	for _, k := range sortedKeys(s.Env) {
		add("env."+k, s.Env[k], true)
	}
	return out
}

func checkCSS(path, sel string) []FieldError {
	if sel == "" {
		return nil
	}
	if _, err := cascadia.Compile(sel); err != nil {
		return []FieldError{{Path: path, Msg: fmt.Sprintf("invalid CSS selector %q: %v", truncate(sel), err)}}
	}
	return nil
}

func checkRegexp(path, re string) []FieldError {
	if re == "" {
		return nil
	}
	if _, err := regexp.Compile(re); err != nil {
		return []FieldError{{Path: path, Msg: fmt.Sprintf("invalid regexp: %v", err)}}
	}
	return nil
}

func checkDuration(path, d string) []FieldError {
	if d == "" {
		return nil
	}
	v, err := time.ParseDuration(d)
	if err != nil {
		return []FieldError{{Path: path, Msg: fmt.Sprintf("%q is not a duration like \"250ms\" or \"2s\"", truncate(d))}}
	}
	if v < 0 {
		return []FieldError{{Path: path, Msg: "negative"}}
	}
	return nil
}

func schemeOf(raw string) string {
	if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.Scheme != "" {
		return strings.ToLower(u.Scheme)
	}
	if i := strings.Index(raw, ":"); i > 0 {
		return truncate(strings.ToLower(strings.TrimSpace(raw[:i])))
	}
	return ""
}

// truncate keeps hostile values from turning an error message into a megabyte.
func truncate(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
