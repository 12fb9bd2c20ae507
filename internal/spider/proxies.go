package spider

import (
	"fmt"
	"net/netip"
	"regexp"

	"crawlq/internal/fetch"
	"crawlq/internal/proxy"
)

// Ban is what a page looks like when the site has banned the address (or session) it came
// from, and how a banned page is retried: through the next proxy (Settings.Proxies, the
// banning one rested), without counting an attempt, up to Retries times; past them the ban is
// the page's retryable failure like any other. The zero value detects nothing.
type Ban struct {
	Statuses []int  // HTTP statuses that mean a ban (403, 429...); default none
	Body     string // Go regexp: a page whose body matches is banned whatever its status; default none
	// Redirect is a Go regexp: a page redirected to a URL it matches (absolute, as the redirect
	// resolves; a challenge page such as /captcha) is banned; default none.
	Redirect string
	Retries  int // banned fetches of a page retried without counting an attempt; default 5, at most 100
}

// MaxSessions bounds Settings.Sessions.
const MaxSessions = 10000

// DefaultBanRetries is Ban.Retries' default.
const DefaultBanRetries = 5

// Detects reports whether the ban rule says anything.
func (b Ban) Detects() bool { return len(b.Statuses) > 0 || b.Body != "" || b.Redirect != "" }

// BanSpec is the spec's ban: section.
type BanSpec struct {
	Status   []int  `yaml:"status"`
	Body     string `yaml:"body"`
	Redirect string `yaml:"redirect"`
	Retries  int    `yaml:"retries"`
}

func (b *BanSpec) ban() Ban {
	if b == nil {
		return Ban{}
	}
	return Ban{Statuses: append([]int(nil), b.Status...), Body: b.Body, Redirect: b.Redirect, Retries: b.Retries}
}

func (b Ban) fieldErrors(add func(path, msg string)) {
	for i, st := range b.Statuses {
		if st < 100 || st > 599 {
			add(fmt.Sprintf("ban.status[%d]", i), fmt.Sprintf("%d is not an HTTP status (100..599)", st))
		}
	}
	if b.Body != "" {
		if _, err := regexp.Compile(b.Body); err != nil {
			add("ban.body", "not a Go regexp: "+err.Error())
		}
	}
	if b.Redirect != "" {
		if _, err := regexp.Compile(b.Redirect); err != nil {
			add("ban.redirect", "not a Go regexp: "+err.Error())
		}
	}
	if b.Retries < 0 || b.Retries > 100 {
		add("ban.retries", fmt.Sprintf("%d out of range 0..100", b.Retries))
	}
	if b.Retries > 0 && !b.Detects() {
		add("ban", "retries without status, body or redirect: nothing would be taken for a ban")
	}
}

// MaxProxyConcurrency bounds Settings.ProxyConcurrency.
const MaxProxyConcurrency = 1000

// proxyPolitenessErrors checks a spider's politeness per proxy.
func proxyPolitenessErrors(s Settings, add func(path, msg string)) {
	if s.ProxyDelay < 0 {
		add("proxy_delay", "negative")
	}
	if s.ProxyConcurrency < 0 || s.ProxyConcurrency > MaxProxyConcurrency {
		add("proxy_concurrency", fmt.Sprintf("%d out of range 0..%d", s.ProxyConcurrency, MaxProxyConcurrency))
	}
	if len(s.Proxies) == 0 {
		if s.ProxyDelay > 0 {
			add("proxy_delay", "needs proxies")
		}
		if s.ProxyConcurrency > 0 {
			add("proxy_concurrency", "needs proxies")
		}
	}
}

// proxiesErrors checks each of a spider's proxy URLs as far as it can before the runner's
// environment fills in their ${CRAWLQ_PROXY_...} variables. Its messages never hold a password.
func proxiesErrors(proxies []string, allowPrivate bool, add func(path, msg string)) {
	seen := map[string]int{}
	for i, raw := range proxies {
		path := fmt.Sprintf("proxies[%d]", i)
		p, err := proxy.ParseExpanded(raw, proxy.Placeholder)
		if err != nil {
			add(path, err.Error())
			continue
		}
		if j, dup := seen[raw]; dup {
			add(path, fmt.Sprintf("the same proxy as proxies[%d]", j))
		}
		seen[raw] = i
		if a, err := netip.ParseAddr(p.Host); err == nil {
			// Loopback is for local runs (--allow-loopback), judged when dialed.
			if err := fetch.CheckProxyAddr(a, true, allowPrivate); err != nil {
				add(path, err.Error())
			}
		}
	}
}
