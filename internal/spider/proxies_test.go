package spider_test

import (
	"strings"
	"testing"
	"time"

	"crawlq/internal/spider"
)

// proxies: and ban: are checked at push, each mistake naming its field, and no message shows a
// proxy's password.
func TestProxiesAndBanAreChecked(t *testing.T) {
	base := "name: p\nstart_urls: [https://example.com/]\n"
	for _, tc := range []struct {
		spec, field string // field: the path the error names, "" for a valid spec
	}{
		{"proxies: [http://u:s3cret@10.0.0.5:3128, 'socks5://u:${CRAWLQ_PROXY_PASS}@proxy.example', https://p.example]\n", ""},
		{"proxies: [http://127.0.0.1:3128]\nban: {status: [403, 429], body: 'Access denied|captcha'}\n", ""},
		{"proxies: [ftp://u:s3cret@h:21]\n", "proxies[0]"},
		{"proxies: [http://h:1, 'http://u:s3cret@h:99999']\n", "proxies[1]"},
		{"proxies: ['http://u:${DATABASE_URL}@h:1']\n", "proxies[0]"},
		{"proxies: [http://u:s3cret@169.254.169.254:80]\n", "proxies[0]"},
		{"proxies: [http://h:1, http://h:1]\n", "proxies[1]"},
		{"proxies: [socks5h://u:s3cret@h]\n", "proxies[0]"},
		{"ban: {status: [403, 700]}\n", "ban.status[1]"},
		{"ban: {body: '(unclosed'}\n", "ban.body"},
		{"ban: {status: [403], retries: 101}\n", "ban.retries"},
		{"ban: {retries: 3}\n", "ban"},
		{"ban: {status: 403}\n", "ban.status"},
		{"ban: {redirect: '/captcha|/challenge'}\n", ""},
		{"ban: {redirect: '(unclosed'}\n", "ban.redirect"},
		{"ban: {redirect: [a]}\n", "ban.redirect"},
		{"proxies: [http://h:1]\nproxy_delay: 2s\nproxy_concurrency: 4\n", ""},
		{"proxies: [http://h:1]\nproxy_delay: soon\n", "proxy_delay"},
		{"proxies: [http://h:1]\nproxy_delay: -1s\n", "proxy_delay"},
		{"proxy_delay: 1s\n", "proxy_delay"},
		{"proxies: [http://h:1]\nproxy_concurrency: -1\n", "proxy_concurrency"},
		{"proxies: [http://h:1]\nproxy_concurrency: 1001\n", "proxy_concurrency"},
		{"proxy_concurrency: 2\n", "proxy_concurrency"},
		{"sessions: 8\nproxies: [http://h:1]\n", ""},
		{"sessions: -1\n", "sessions"},
		{"sessions: 10001\n", "sessions"},
	} {
		s, err := spider.ParseSpec([]byte(base+tc.spec), "p.yaml")
		var st spider.Settings
		if err == nil {
			st, err = s.Settings()
		}
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%q: %v", tc.spec, err)
		case tc.field != "" && (err == nil || !strings.Contains(err.Error(), tc.field+":")):
			t.Errorf("%q: %v; want an error naming %s", tc.spec, err, tc.field)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("%q: the error shows the password: %v", tc.spec, err)
		case tc.field == "" && strings.Contains(tc.spec, "ban:") && st.Ban.Retries != spider.DefaultBanRetries:
			t.Errorf("%q: ban retries %d, want the default %d", tc.spec, st.Ban.Retries, spider.DefaultBanRetries)
		case tc.field == "" && strings.Contains(tc.spec, "proxy_delay") && (st.ProxyDelay != 2*time.Second || st.ProxyConcurrency != 4):
			t.Errorf("%q: proxy delay %s, concurrency %d; want 2s and 4", tc.spec, st.ProxyDelay, st.ProxyConcurrency)
		case tc.field == "" && strings.Contains(tc.spec, "redirect") && st.Ban.Redirect != "/captcha|/challenge":
			t.Errorf("%q: ban redirect %q", tc.spec, st.Ban.Redirect)
		}
	}
}
