package robots

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

const ua = "crawlq/1.0"

func TestRulesForCrawlqAndStar(t *testing.T) {
	t.Parallel()
	p := Parse(200, []byte(`# example
User-agent: *
Disallow: /private
Disallow: /tmp/
Crawl-delay: 2

User-agent: crawlq
Disallow: /no-crawlq
Allow: /no-crawlq/but-this
Disallow: /*.pdf$
Crawl-delay: 0.5

User-agent: otherbot
Disallow: /
`))
	if err := p.Err(); err != nil {
		t.Errorf("Err() = %v for a clean file", err)
	}
	for _, tc := range []struct {
		agent, path string
		want        bool
	}{
		// crawlq has its own group, so the * group does not apply to it.
		{ua, "/private/x", true},
		{ua, "/no-crawlq", false},
		{ua, "/no-crawlq/page?x=1", false},
		{ua, "/no-crawlq/but-this/ok", true},
		{ua, "/docs/a.pdf", false},
		{ua, "/docs/a.pdf?x", true},
		{ua, "/", true},
		{"CrawlQ", "/no-crawlq", false},            // case-insensitive
		{"Mozilla/5.0 crawlq", "/no-crawlq", true}, // product token is "mozilla": the * group
		{"Mozilla/5.0 crawlq", "/private", false},  //
		{"somebot/2", "/private", false},           // falls back to *
		{"somebot/2", "/tmp/", false},              //
		{"somebot/2", "/tmpfile", true},            //
		{"somebot/2", "/no-crawlq", true},          //
		{"otherbot", "/anything", false},           //
		{"otherbot", "/robots.txt", true},          // always allowed
		{"", "/private", false},                    // no agent: the * group
		{ua, "", true},                             // empty path is "/"
		{ua, "no-crawlq", false},                   // unrooted path is rooted
	} {
		if got := p.Allowed(tc.agent, tc.path); got != tc.want {
			t.Errorf("Allowed(%q, %q) = %v, want %v", tc.agent, tc.path, got, tc.want)
		}
	}
	if d := p.CrawlDelay(ua); d != 500*time.Millisecond {
		t.Errorf("CrawlDelay(crawlq) = %s, want 500ms", d)
	}
	if d := p.CrawlDelay("somebot"); d != 2*time.Second {
		t.Errorf("CrawlDelay(somebot) = %s, want 2s", d)
	}
	if d := p.CrawlDelay("otherbot"); d != 0 {
		t.Errorf("CrawlDelay(otherbot) = %s, want 0", d)
	}
}

func TestExactProductTokenMatch(t *testing.T) {
	t.Parallel()
	// The library alone would let "crawl" (a prefix of "crawlq") capture crawlq.
	p := Parse(200, []byte("User-agent: crawl\nDisallow: /\n\nUser-agent: *\nAllow: /\n"))
	if !p.Allowed(ua, "/page") {
		t.Errorf("crawlq matched the group for \"crawl\"")
	}
	if p.Allowed("crawl/3", "/page") {
		t.Errorf("crawl did not match its own group")
	}
}

func TestGroups(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		path       string
		want       bool
	}{
		{"agents share a group", "User-agent: a\nUser-agent: crawlq\nDisallow: /x\n", "/x", false},
		{"blank lines do not end a group", "User-agent: crawlq\n\nDisallow: /x\n", "/x", false},
		{"empty disallow is its own group", "User-agent: crawlq\nDisallow:\n\nUser-agent: *\nDisallow: /\n", "/x", true},
		{"empty disallow does not leak into next group", "User-agent: *\nDisallow:\nUser-agent: crawlq\nDisallow: /\n", "/x", false},
		{"group with no rules at the end allows", "User-agent: *\nDisallow: /\n\nUser-agent: crawlq\n", "/x", true},
		{"rules before any user-agent are ignored", "Disallow: /\nUser-agent: crawlq\nAllow: /\n", "/x", true},
		{"orphan rules only", "Disallow: /\n", "/x", true},
		{"comments and CR line endings", "User-agent: crawlq # me\rDisallow: /x # no\r", "/x", false},
		{"CRLF", "User-agent: crawlq\r\nDisallow: /x\r\n", "/x", false},
		{"BOM", "\xef\xbb\xbfUser-agent: crawlq\nDisallow: /x\n", "/x", false},
		{"bad crawl-delay does not void the file", "User-agent: crawlq\nCrawl-delay: soon\nDisallow: /x\n", "/x", false},
		{"empty file allows", "", "/x", true},
		{"longest match wins", "User-agent: crawlq\nDisallow: /a\nAllow: /a/b\n", "/a/b/c", true},
		{"wildcard", "User-agent: crawlq\nDisallow: /*?sessionid=\n", "/p?sessionid=1", false},
		{"end anchor", "User-agent: crawlq\nDisallow: /x$\n", "/x/y", true},
		{"user-agent with version", "User-agent: crawlq/2.0\nDisallow: /x\n", "/x", false},
		{"key without colon is skipped", "User-agent: crawlq\nDisallow /x\n", "/x", true},
		{"raw NUL in path does not hit the placeholder", "User-agent: crawlq\nDisallow:\n", "/\x00", true},
	} {
		p := Parse(200, []byte(tc.body))
		if got := p.Allowed(ua, tc.path); got != tc.want {
			t.Errorf("%s: Allowed(%q) = %v, want %v", tc.name, tc.path, got, tc.want)
		}
	}
}

func TestStatusSemantics(t *testing.T) {
	t.Parallel()
	body := []byte("User-agent: *\nDisallow: /x\n")
	for _, tc := range []struct {
		status int
		x, y   bool // Allowed /x, /y
	}{
		{200, false, true},
		{204, false, true},
		{301, true, true},
		{400, true, true},
		{401, true, true},
		{403, true, true},
		{404, true, true},
		{410, true, true},
		{429, false, false},
		{500, false, false},
		{503, false, false},
		{0, false, false},
		{100, false, false},
		{-1, false, false},
		{999, false, false},
	} {
		p := Parse(tc.status, body)
		if p.Allowed(ua, "/x") != tc.x || p.Allowed(ua, "/y") != tc.y {
			t.Errorf("status %d: Allowed /x=%v /y=%v, want %v %v", tc.status, p.Allowed(ua, "/x"), p.Allowed(ua, "/y"), tc.x, tc.y)
		}
		if p.Status() != tc.status {
			t.Errorf("Status() = %d, want %d", p.Status(), tc.status)
		}
	}
	u := Unreachable()
	if u.Allowed(ua, "/") || u.Allowed(ua, "/robots.txt") || u.Err() == nil {
		t.Errorf("Unreachable allows, or has no Err")
	}
	var nilPolicy *Policy
	if !nilPolicy.Allowed(ua, "/") || nilPolicy.CrawlDelay(ua) != 0 {
		t.Errorf("nil policy should allow all with no delay")
	}
}

func TestFromStoredMatchesParse(t *testing.T) {
	t.Parallel()
	body := []byte("User-agent: crawlq\nDisallow: /a\nCrawl-delay: 3\nSitemap: https://example.com/sitemap.xml\n")
	a, b := Parse(200, body), FromStored(200, body)
	for _, path := range []string{"/a", "/b"} {
		if a.Allowed(ua, path) != b.Allowed(ua, path) {
			t.Errorf("Parse and FromStored disagree on %s", path)
		}
	}
	if a.CrawlDelay(ua) != 3*time.Second || b.CrawlDelay(ua) != 3*time.Second {
		t.Errorf("crawl delay %s / %s, want 3s", a.CrawlDelay(ua), b.CrawlDelay(ua))
	}
	if s := b.Sitemaps(); len(s) != 1 || s[0] != "https://example.com/sitemap.xml" {
		t.Errorf("Sitemaps() = %q", s)
	}
}

func TestCrawlDelayEdges(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]time.Duration{
		"User-agent: crawlq\nCrawl-delay: 1e300\n": MaxCrawlDelay,
		"User-agent: crawlq\nCrawl-delay: -4\n":    0,
		"User-agent: crawlq\nCrawl-delay: NaN\n":   0,
		"User-agent: crawlq\nCrawl-delay: inf\n":   0,
		"User-agent: crawlq\nCrawl-delay:\n":       0,
		"Crawl-delay: 9\nUser-agent: crawlq\n":     0,
		"User-agent: crawlq\nCrawl-delay: 10\n":    10 * time.Second,
	} {
		p := Parse(200, []byte(body))
		if got := p.CrawlDelay(ua); got != want {
			t.Errorf("%q: CrawlDelay = %s, want %s", body, got, want)
		}
	}
	if err := Parse(200, []byte("User-agent: crawlq\nCrawl-delay: soon\n")).Err(); err == nil {
		t.Errorf("Err() = nil after skipping a bad Crawl-delay")
	}
}

func TestHugeFileIsCut(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("User-agent: crawlq\n")
	for b.Len() < MaxBodyBytes+1000 {
		fmt.Fprintf(&b, "Disallow: /dir%d/\n", b.Len())
	}
	b.WriteString("Disallow: /after-the-cut\n")
	p := Parse(200, []byte(b.String()))
	if !p.Allowed(ua, "/after-the-cut") {
		t.Errorf("a rule past MaxBodyBytes was applied")
	}
	if p.Allowed(ua, "/dir19/") {
		t.Errorf("a rule before the cut was lost")
	}
}

func TestRobotsURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://Example.COM/a/b?c=d#e":          "http://example.com/robots.txt",
		"HTTPS://user:pw@example.com:443/x":     "https://example.com/robots.txt",
		"http://example.com:80/":                "http://example.com/robots.txt",
		"http://127.0.0.1:8080/page":            "http://127.0.0.1:8080/robots.txt",
		"https://example.com:8443":              "https://example.com:8443/robots.txt",
		"http://[::1]:9000/x":                   "http://[::1]:9000/robots.txt",
		"http://[2001:db8::1]/x":                "http://[2001:db8::1]/robots.txt",
		" https://example.com/with-space-trim ": "https://example.com/robots.txt",
	} {
		got, err := RobotsURL(in)
		if err != nil || got != want {
			t.Errorf("RobotsURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "/relative", "ftp://example.com/", "http://", "http://[::1", "mailto:a@b.c", "\x7f"} {
		if got, err := RobotsURL(in); !errors.Is(err, ErrInvalidURL) {
			t.Errorf("RobotsURL(%q) = %q, %v; want ErrInvalidURL", in, got, err)
		}
	}
	// The error names the URL without its password.
	if _, err := RobotsURL("ftp://user:s3cret@example.com/"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("RobotsURL of an ftp URL with a password: %v; want an error without it", err)
	}
}

func TestCache(t *testing.T) {
	t.Parallel()
	c := NewCache(2)
	p1, p2, p3 := Parse(200, nil), Parse(404, nil), Unreachable()
	c.Put(1, "a", p1)
	c.Put(1, "b", p2)
	if got, ok := c.Get(1, "a"); !ok || got != p1 { // a is now most recent
		t.Fatalf("Get(1,a) = %v, %v", got, ok)
	}
	c.Put(2, "a", p3) // evicts (1,b)
	if _, ok := c.Get(1, "b"); ok {
		t.Errorf("(1,b) not evicted")
	}
	if got, ok := c.Get(2, "a"); !ok || got != p3 {
		t.Errorf("Get(2,a) = %v, %v; runs must not share entries", got, ok)
	}
	c.Put(2, "a", p2) // replace in place
	if got, _ := c.Get(2, "a"); got != p2 || c.Len() != 2 {
		t.Errorf("replace: got %v, len %d", got, c.Len())
	}
	if NewCache(0).max != DefaultCacheSize {
		t.Errorf("NewCache(0) size is not the default")
	}
}

func TestCacheConcurrent(t *testing.T) {
	t.Parallel()
	c := NewCache(50)
	p := Parse(200, []byte("User-agent: *\nDisallow: /x\n"))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				host := fmt.Sprintf("h%d", (i*7+g)%80)
				if got, ok := c.Get(int64(g%2), host); ok && got.Allowed(ua, "/x") {
					t.Errorf("cached policy changed")
				}
				c.Put(int64(g%2), host, p)
			}
		})
	}
	wg.Wait()
	if n := c.Len(); n > 50 {
		t.Errorf("Len() = %d, exceeds bound 50", n)
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"User-agent: *\nDisallow: /\n",
		"User-agent: crawlq\nAllow: /a\nDisallow: /*.php$\nCrawl-delay: 1.5\n",
		"Disallow: /orphan\nUser-agent: *\n",
		"User-agent: *\nDisallow: *\nAllow: $\nDisallow: /**$$\n",
		"User-agent: *\nCrawl-delay: 1e309\nCrawl-delay: -0\nCrawl-delay: x\n",
		"User-agent:\nDisallow:\nAllow:\nSitemap:\n",
		"\xef\xbb\xbfUser-agent: \xff\xfe\nDisallow: /\xc3(\n",
		"User-agent: *\rDisallow: /a\r\rUser-agent: b\r\nDisallow: /b # c\n",
		"::::\n#\n: value\nkey:\n\x00\x00\n",
		"User-agent: *\nDisallow: /" + strings.Repeat("*a", 3000) + "\n",
		"User-agent: *\nDisallow: /(?i)[\\\n",
		"Sitemap: http://example.com/s.xml\nHost: example.com\nClean-param: x\n",
	} {
		f.Add(200, []byte(seed), "crawlq/1.0", "/a.php?x=1")
	}
	f.Add(503, []byte("User-agent: *\nAllow: /\n"), "", "")
	f.Fuzz(func(t *testing.T, status int, body []byte, agent, path string) {
		p := Parse(status, body)
		allowed := p.Allowed(agent, path)
		_ = p.CrawlDelay(agent)
		_ = p.Sitemaps()
		if d := p.CrawlDelay(agent); d < 0 || d > MaxCrawlDelay {
			t.Fatalf("CrawlDelay = %s out of range", d)
		}
		if status >= 200 && status < 300 {
			// normalize must leave nothing the library rejects.
			if p.mode == modeDisallowAll {
				t.Fatalf("parse fell back to disallow-all: %v", p.Err())
			}
			if q := FromStored(status, body); q.Allowed(agent, path) != allowed {
				t.Fatalf("FromStored disagrees with Parse")
			}
		}
		_, _ = RobotsURL(path)
	})
}
