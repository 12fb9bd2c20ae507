// Package fetch owns crawlq's HTTP GET of one page: a shared, tuned transport,
// redirect policy, body size caps (on the decoded size, so compression bombs are
// bounded), content decoding (gzip, deflate, charset to UTF-8), a dial-time guard
// against every address that is not public (loopback, private, link-local, cloud
// metadata: what a crawled page must not reach inside a VPC), and the classification of
// failures into retryable or not for the queue's retry policy.
//
// It knows nothing about robots.txt, politeness or jobs; internal/crawl composes those.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"crawlq/internal/clock"
	"crawlq/internal/proxy"
)

// Config tunes a Fetcher. The zero value is valid: every field has a default.
type Config struct {
	// ConnectTimeout bounds the TCP connect and the TLS handshake. Default 10s.
	ConnectTimeout time.Duration
	// ReadTimeout bounds the whole exchange: connect, headers, redirects and the
	// body. Default 30s.
	ReadTimeout time.Duration
	// MaxBodyBytes caps the decoded body. A larger body fails with ErrBodyTooLarge
	// and is not read past the cap. Default 10 MiB.
	MaxBodyBytes int64
	// MaxRedirects is the most redirects followed for one Fetch; more fails with
	// ErrTooManyRedirects. Zero means the default, 10.
	MaxRedirects int
	// NoFollow returns a redirect (3xx with a Location) as the Result instead of following
	// it, with Result.Location resolved. A crawler that follows redirects as new requests
	// uses it, so each hop is deduplicated and paced like any other request. Default false.
	NoFollow bool
	// UserAgent is sent with every request. Default "crawlq/1.0".
	UserAgent string
	// AllowPrivate lets the fetcher connect to addresses that are not public: loopback
	// (127.0.0.0/8, ::1), private (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16), shared
	// (CGNAT, 100.64.0.0/10), unique local (fc00::/7), link-local (169.254.0.0/16,
	// fe80::/10), unspecified (0.0.0.0/8, ::), cloud metadata (169.254.169.254,
	// fd00:ec2::254), benchmarking (198.18.0.0/15), special-purpose (192.0.0.0/24),
	// multicast (224.0.0.0/4, ff00::/8) and reserved (240.0.0.0/4, broadcast included),
	// also in their IPv4-mapped and NAT64 forms. Default false: a
	// connection to one fails with a *RefusedError (ErrForbiddenAddress), decided on
	// the resolved address of every connection before connect(), so also after
	// redirects and DNS answers that change. A spider asks for it with
	// allow_private: true.
	AllowPrivate bool
	// AllowLoopback lets the fetcher connect to loopback addresses only, every other
	// non-public address staying refused: for a site served on this machine (the
	// demo, local development, tests, benchmarks). Default false.
	AllowLoopback bool
	// Proxy, when set, is the proxy every connection goes through (internal/proxy: HTTP CONNECT
	// or SOCKS5). The address guard still judges the target, resolved here, and the proxy's own
	// address by the proxies' rule (proxy.go). Default nil: direct connections.
	Proxy *proxy.Proxy
	// MaxIdleConnsPerHost is how many keep-alive connections are kept per host.
	// Default 64, sized for many goroutines crawling one site.
	MaxIdleConnsPerHost int
	// Clock is what a Retry-After date is measured against when the server sent no Date.
	// Default the wall clock.
	Clock clock.Clock
}

const (
	defaultConnectTimeout      = 10 * time.Second
	defaultReadTimeout         = 30 * time.Second
	defaultMaxBodyBytes        = 10 << 20
	defaultMaxRedirects        = 10
	defaultUserAgent           = "crawlq/1.0"
	defaultMaxIdleConnsPerHost = 64
)

func (c Config) validate() error {
	switch {
	case c.ConnectTimeout < 0:
		return fmt.Errorf("fetch config: ConnectTimeout must not be negative, got %s", c.ConnectTimeout)
	case c.ReadTimeout < 0:
		return fmt.Errorf("fetch config: ReadTimeout must not be negative, got %s", c.ReadTimeout)
	case c.MaxBodyBytes < 0:
		return fmt.Errorf("fetch config: MaxBodyBytes must not be negative, got %d", c.MaxBodyBytes)
	case c.MaxRedirects < 0:
		return fmt.Errorf("fetch config: MaxRedirects must not be negative, got %d", c.MaxRedirects)
	case c.MaxIdleConnsPerHost < 0:
		return fmt.Errorf("fetch config: MaxIdleConnsPerHost must not be negative, got %d", c.MaxIdleConnsPerHost)
	case strings.ContainsAny(c.UserAgent, "\r\n\x00"):
		// A newline would let the value inject headers.
		return fmt.Errorf("fetch config: UserAgent must not contain CR, LF or NUL")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = defaultConnectTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = defaultReadTimeout
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = defaultMaxBodyBytes
	}
	if c.MaxRedirects == 0 {
		c.MaxRedirects = defaultMaxRedirects
	}
	if c.UserAgent == "" {
		c.UserAgent = defaultUserAgent
	}
	if c.MaxIdleConnsPerHost == 0 {
		c.MaxIdleConnsPerHost = defaultMaxIdleConnsPerHost
	}
	c.Clock = clock.Or(c.Clock)
	return c
}

// Fetcher performs GETs. It is safe for concurrent use; share one per process so
// keep-alive connections are reused across goroutines.
type Fetcher struct {
	cfg       Config
	transport *http.Transport
	client    *http.Client
	userAgent []string // the User-Agent header's value
}

var (
	acceptHeader         = []string{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
	acceptEncodingHeader = []string{"gzip, deflate"}
)

// Result is one fetched page.
type Result struct {
	// URL is the final URL, after redirects.
	URL string
	// Status is the final HTTP status code.
	Status int
	// Header is the final response's header, as received.
	Header http.Header
	// Body is the decompressed body converted to UTF-8 for textual content types
	// (invalid bytes become U+FFFD); other content types are left as received.
	Body []byte
	// ContentType is the lower-cased media type without parameters (the charset no
	// longer applies to Body), sniffed from the body when the server sent none (empty
	// when it sent none and no body either: a 304, a 204).
	ContentType string
	// Bytes is the number of body bytes read off the wire (compressed size).
	Bytes int64
	// Redirects is the number of redirects followed.
	Redirects int
	// Location is the absolute target of a redirect returned unfollowed (Config.NoFollow).
	Location string
	// Elapsed is the wall time of the whole Fetch.
	Elapsed time.Duration
}

// New builds a Fetcher with its own transport.
func New(cfg Config) (*Fetcher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()

	dial := newDialer(cfg).DialContext
	if cfg.Proxy != nil {
		dial = ProxyDialer(cfg.Proxy, cfg)
	}
	transport := &http.Transport{
		// No proxy of net/http's: it would dial on our behalf, the target's name resolved by the
		// proxy, past the address guard. Config.Proxy is dialed by ProxyDialer instead.
		Proxy:                  nil,
		DialContext:            dial,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           cfg.MaxIdleConnsPerHost * 16,
		MaxIdleConnsPerHost:    cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    cfg.ConnectTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
		// We ask for and decode gzip/deflate ourselves, to count wire bytes and to
		// cap the decoded size.
		DisableCompression: true,
	}
	f := &Fetcher{cfg: cfg, transport: transport, userAgent: []string{cfg.UserAgent}}
	f.client = &http.Client{
		Transport:     transport,
		CheckRedirect: f.checkRedirect,
	}
	return f, nil
}

// newDialer builds the dialer of every connection a Fetcher makes, with its address guard.
func newDialer(cfg Config) *net.Dialer {
	dialer := &net.Dialer{
		Timeout:   cfg.ConnectTimeout,
		KeepAlive: 30 * time.Second,
	}
	if !cfg.AllowPrivate {
		// Control runs on the resolved address after socket() and before connect(),
		// so neither DNS rebinding nor a redirect can reach a forbidden address.
		dialer.Control = guard{allowLoopback: cfg.AllowLoopback}.control
	}
	return dialer
}

// Close releases idle keep-alive connections. The Fetcher stays usable.
func (f *Fetcher) Close() {
	f.transport.CloseIdleConnections()
}

func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if f.cfg.NoFollow {
		return http.ErrUseLastResponse
	}
	if err := checkScheme(req.URL); err != nil {
		return err
	}
	if len(via) > f.cfg.MaxRedirects {
		return fmt.Errorf("follow redirect to %s: %w (limit %d)", req.URL.Redacted(), ErrTooManyRedirects, f.cfg.MaxRedirects)
	}
	next := req.URL.String()
	for _, prev := range via {
		if prev.URL.String() == next {
			return fmt.Errorf("follow redirect to %s: %w", req.URL.Redacted(), ErrRedirectLoop)
		}
	}
	return nil
}

func checkScheme(u *url.URL) error {
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		return nil
	}
	return fmt.Errorf("fetch %q: %w", u.Scheme, ErrScheme)
}

// Fetch GETs rawURL, following redirects. For a final status >= 400 it returns
// both the Result (with the body when it could be read within the caps) and a
// *StatusError. Any other error comes with a
// nil Result; classify it with Retryable, RetryAfter and Kind.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) (*Result, error) {
	return f.fetch(ctx, rawURL, Validators{}, nil)
}

// Validators are what a page's last answer said of its version (its ETag and Last-Modified
// headers, as received). Sent back, they make a request conditional.
type Validators struct {
	ETag         string
	LastModified string
}

// FetchIf is Fetch sending v as If-None-Match and If-Modified-Since (those that are set). A 304
// answer is a Result with Status 304 (http.StatusNotModified), no body and no error: the page has
// not changed since the answer v came from.
func (f *Fetcher) FetchIf(ctx context.Context, rawURL string, v Validators) (*Result, error) {
	return f.fetch(ctx, rawURL, v, nil)
}

// FetchWith is FetchIf sending cookies too (a session's: the caller keeps the jar and reads
// what the response set from Result.Header's Set-Cookie).
func (f *Fetcher) FetchWith(ctx context.Context, rawURL string, v Validators, cookies []*http.Cookie) (*Result, error) {
	return f.fetch(ctx, rawURL, v, cookies)
}

// FetchURL is FetchWith for a URL the caller has parsed already (a crawler that read its host
// and path for robots.txt), which it does not parse again. u is not modified, and must not be
// while the fetch runs.
func (f *Fetcher) FetchURL(ctx context.Context, u *url.URL, v Validators, cookies []*http.Cookie) (*Result, error) {
	took := clock.StartStopwatch()
	reqCtx, cancel := context.WithTimeoutCause(ctx, f.cfg.ReadTimeout, ErrTimeout)
	defer cancel()
	if strings.HasSuffix(u.Host, ":") {
		// As NewRequest does: "host:" is the host with its default port.
		c := *u
		c.Host = strings.TrimSuffix(c.Host, ":")
		u = &c
	}
	req := (&http.Request{Method: http.MethodGet, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header, 6), Host: u.Host}).WithContext(reqCtx)
	return f.do(ctx, reqCtx, req, took, v, cookies)
}

// fetch parses rawURL once (as http.NewRequest would) and fetches it: the checks read the parsed
// form.
func (f *Fetcher) fetch(ctx context.Context, rawURL string, v Validators, cookies []*http.Cookie) (*Result, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse url: %w: %w", ErrInvalidURL, err)
	}
	return f.FetchURL(ctx, u, v, cookies)
}

// do sends req (its context reqCtx: ctx with the read timeout) with the fetcher's headers, v and
// cookies, and reads its answer; took started with the fetch.
func (f *Fetcher) do(ctx, reqCtx context.Context, req *http.Request, took clock.Stopwatch, v Validators, cookies []*http.Cookie) (*Result, error) {
	if err := checkScheme(req.URL); err != nil {
		return nil, err
	}
	if req.URL.Host == "" {
		return nil, fmt.Errorf("parse url %q: %w: no host", req.URL.Redacted(), ErrInvalidURL)
	}
	// The header values are shared by every request: net/http only reads them (a redirect
	// copies them first), and Set would allocate a slice per header per page.
	req.Header["User-Agent"] = f.userAgent
	req.Header["Accept"] = acceptHeader
	req.Header["Accept-Encoding"] = acceptEncodingHeader
	if v.ETag != "" {
		req.Header.Set("If-None-Match", v.ETag)
	}
	if v.LastModified != "" {
		req.Header.Set("If-Modified-Since", v.LastModified)
	}
	for _, ck := range cookies {
		req.AddCookie(ck)
	}

	resp, err := f.client.Do(req)
	if err != nil {
		return nil, f.classifyTransportErr(ctx, reqCtx, err)
	}
	defer resp.Body.Close()

	res := &Result{
		URL:       resp.Request.URL.String(),
		Status:    resp.StatusCode,
		Header:    resp.Header,
		Redirects: countRedirects(resp),
	}
	if f.cfg.NoFollow && resp.StatusCode >= 300 && resp.StatusCode < 400 {
		if loc, err := resp.Location(); err == nil {
			if err := checkScheme(loc); err != nil {
				return nil, err
			}
			res.Location = loc.String()
		}
	}
	if resp.StatusCode >= 400 {
		// The status is the answer; an error page that is too large or cut off
		// must not hide it from the retry policy.
		se := newStatusError(resp, f.cfg.Clock.Now())
		if resp.ContentLength <= f.cfg.MaxBodyBytes {
			if raw, wire, err := readBody(resp, f.cfg.MaxBodyBytes); err == nil {
				res.Bytes = wire
				res.ContentType, res.Body = decodeText(raw, resp.Header.Get("Content-Type"))
			}
		}
		res.Elapsed = took.Elapsed()
		return res, se
	}
	if resp.ContentLength > f.cfg.MaxBodyBytes {
		// Checked before reading: a compressed body this large decodes to at least
		// about as much.
		return nil, fmt.Errorf("read body of %s: %w: Content-Length %d > %d", res.URL, ErrBodyTooLarge, resp.ContentLength, f.cfg.MaxBodyBytes)
	}
	if resp.Body == http.NoBody {
		// An answer without a body (a 304, a 204): nothing to read, decode or sniff, which a
		// recrawl's every page would pay for nothing.
		if ct := resp.Header.Get("Content-Type"); ct != "" {
			res.ContentType, _ = decodeText(nil, ct)
		}
		res.Elapsed = took.Elapsed()
		return res, nil
	}
	raw, wire, err := readBody(resp, f.cfg.MaxBodyBytes)
	if err != nil {
		if errors.Is(err, ErrBodyTooLarge) || errors.Is(err, ErrContentEncoding) {
			return nil, fmt.Errorf("read body of %s: %w", res.URL, err)
		}
		return nil, f.classifyTransportErr(ctx, reqCtx, fmt.Errorf("read body of %s: %w", res.URL, err))
	}
	res.Bytes = wire
	res.ContentType, res.Body = decodeText(raw, resp.Header.Get("Content-Type"))
	res.Elapsed = took.Elapsed()
	return res, nil
}

// classifyTransportErr turns our own deadline into ErrTimeout so callers can tell it
// from their own cancellation.
func (f *Fetcher) classifyTransportErr(callerCtx, reqCtx context.Context, err error) error {
	if callerCtx.Err() == nil && errors.Is(context.Cause(reqCtx), ErrTimeout) {
		return fmt.Errorf("fetch: %w after %s: %w", ErrTimeout, f.cfg.ReadTimeout, err)
	}
	return fmt.Errorf("fetch: %w", err)
}

// countRedirects walks the chain of responses that led to resp.
func countRedirects(resp *http.Response) int {
	n := 0
	for r := resp.Request; r != nil && r.Response != nil; r = r.Response.Request {
		n++
	}
	return n
}
