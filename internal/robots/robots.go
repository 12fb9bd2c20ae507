// Package robots owns crawlq's reading of robots.txt (RFC 9309): turning a fetched
// (or stored) status and body into a Policy that answers "may this user agent fetch
// this path" and "how long between requests", the robots.txt URL for a page, and a
// small in-process cache of policies per run and site.
//
// It does not fetch: internal/crawl fetches robots.txt with internal/fetch, stores
// the status and body once per site per run, and rebuilds the Policy in any worker
// with FromStored.
package robots

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/temoto/robotstxt"
)

// MaxBodyBytes is how much of a robots.txt is read. RFC 9309 lets crawlers stop at
// 500 KiB; content after it is ignored (cut at the last line break before it).
const MaxBodyBytes = 500 << 10

// MaxCrawlDelay caps a site's Crawl-delay so a typo (or malice) cannot park a
// crawl for days.
const MaxCrawlDelay = time.Hour

// ErrInvalidURL is returned by RobotsURL for a URL that is not absolute http(s).
var ErrInvalidURL = errors.New("invalid page url")

type mode uint8

const (
	modeRules mode = iota
	modeAllowAll
	modeDisallowAll
)

// Policy is the parsed robots.txt of one site. It is immutable and safe for
// concurrent use. A nil *Policy allows everything.
type Policy struct {
	status int
	mode   mode
	data   *robotstxt.RobotsData
	// agents holds the lower-cased product tokens named by User-agent lines; a
	// crawler named by none of them follows the "*" group.
	agents map[string]bool
	err    error
}

// Unreachable is the policy for a robots.txt that could not be fetched at all:
// RFC 9309 says to assume complete disallow.
func Unreachable() *Policy {
	return &Policy{mode: modeDisallowAll, err: errors.New("robots.txt unreachable")}
}

// FromStored rebuilds a Policy from a status and body stored earlier; it is Parse.
func FromStored(status int, body []byte) *Policy { return Parse(status, body) }

// Parse builds the Policy for a robots.txt answered with status and body:
//   - 2xx: the rules in body (malformed lines are skipped, never fatal);
//   - 3xx (redirects not followed to the end) and 4xx except 429: allow all, as
//     RFC 9309 treats the file as unavailable;
//   - 429, 5xx, and anything else (0 meaning no answer): disallow all, as RFC 9309
//     treats the site as unreachable. 429 is here rather than with 4xx because a
//     site asking us to slow down should not get crawled harder.
//
// Parse never panics and never fails; Err reports what it had to skip.
func Parse(status int, body []byte) *Policy {
	switch {
	case status >= 200 && status < 300:
	case status == 429:
		return &Policy{status: status, mode: modeDisallowAll}
	case status >= 300 && status < 500:
		return &Policy{status: status, mode: modeAllowAll}
	default:
		return &Policy{status: status, mode: modeDisallowAll}
	}

	text, agents, skipped := normalize(body)
	p := &Policy{status: status, agents: agents}
	if skipped > 0 {
		p.err = fmt.Errorf("parse robots.txt: skipped %d malformed lines", skipped)
	}
	data, err := robotstxt.FromString(text)
	if err != nil {
		// normalize should leave nothing the parser rejects; if it did, be
		// conservative rather than crawl what the site may have forbidden.
		p.mode = modeDisallowAll
		p.err = fmt.Errorf("parse robots.txt: %w", err)
		return p
	}
	p.data = data
	return p
}

// Status is the HTTP status the policy was built from (0 for Unreachable).
func (p *Policy) Status() int {
	if p == nil {
		return 0
	}
	return p.status
}

// Err reports lines skipped while parsing, or why the policy fell back to
// disallowing everything; nil for a clean file. It is for logs, not control flow.
func (p *Policy) Err() error {
	if p == nil {
		return nil
	}
	return p.err
}

// Sitemaps lists the Sitemap URLs the file names.
func (p *Policy) Sitemaps() []string {
	if p == nil || p.data == nil {
		return nil
	}
	return append([]string(nil), p.data.Sitemaps...)
}

// Allowed reports whether userAgent may fetch pathAndQuery (a URL's RequestURI,
// e.g. "/a/b?c=d"). userAgent may be a full User-Agent header value; its product
// token (up to the first "/" or space, case-insensitive) picks the group, and
// crawlers not named in the file follow the "*" group. /robots.txt itself is
// always allowed.
func (p *Policy) Allowed(userAgent, pathAndQuery string) bool {
	if p == nil {
		return true
	}
	switch p.mode {
	case modeAllowAll:
		return true
	case modeDisallowAll:
		return false
	}
	path := cleanPath(pathAndQuery)
	if path == "/robots.txt" {
		return true
	}
	return p.group(userAgent).Test(path)
}

// CrawlDelay is the Crawl-delay the file asks of userAgent, capped at
// MaxCrawlDelay; zero when it asks none.
func (p *Policy) CrawlDelay(userAgent string) time.Duration {
	if p == nil || p.mode != modeRules {
		return 0
	}
	return min(p.group(userAgent).CrawlDelay, MaxCrawlDelay)
}

func (p *Policy) group(userAgent string) *robotstxt.Group {
	tok := productToken(userAgent)
	if !p.agents[tok] {
		// The library picks the longest group name that is a prefix of the agent,
		// so "crawl" would capture "crawlq"; RFC 9309 wants an exact product
		// token match, which we enforce here.
		tok = "*"
	}
	return p.data.FindGroup(tok)
}

// cleanPath makes pathAndQuery a rooted path and escapes control characters: no
// real request path contains a raw NUL, which normalize relies on.
func cleanPath(s string) string {
	if s == "" {
		return "/"
	}
	if strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == 0x7f {
				fmt.Fprintf(&b, "%%%02X", c)
			} else {
				b.WriteByte(c)
			}
		}
		s = b.String()
	}
	if s[0] != '/' {
		s = "/" + s
	}
	return s
}

// productToken is the lower-cased leading run of letters, digits, '_' and '-'
// (RFC 9309's product token, digits allowed), or "*" when there is none.
func productToken(ua string) string {
	ua = strings.TrimSpace(ua)
	end := 0
	for end < len(ua) && isTokenByte(ua[end]) {
		end++
	}
	if end == 0 {
		return "*"
	}
	return strings.ToLower(ua[:end])
}

func isTokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// RobotsURL is the robots.txt URL governing pageURL: scheme://host[:port]/robots.txt,
// with scheme and host lower-cased, user info dropped and a default port removed so
// each site maps to one URL.
func RobotsURL(pageURL string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(pageURL))
	if err != nil {
		return "", fmt.Errorf("parse page url: %w: %w", ErrInvalidURL, err)
	}
	return RobotsURLOf(u)
}

// RobotsURLOf is RobotsURL of a page URL parsed already (a crawler that parsed it for its host
// and path does not parse it again).
func RobotsURLOf(u *url.URL) (string, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("parse page url %q: %w: scheme must be http or https", u.Redacted(), ErrInvalidURL)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", fmt.Errorf("parse page url %q: %w: no host", u.Redacted(), ErrInvalidURL)
	}
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	authority := host
	if strings.Contains(host, ":") {
		authority = "[" + host + "]"
	}
	if port != "" {
		authority = net.JoinHostPort(host, port)
	}
	return scheme + "://" + authority + "/robots.txt", nil
}
