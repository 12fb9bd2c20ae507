package proxy_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"crawlq/internal/proxy"
	"crawlq/internal/proxy/proxytest"
)

func TestParseAndRedact(t *testing.T) {
	ok := []struct{ raw, str, addr string }{
		{"http://u:s3cret@10.0.0.5:3128", "http://u:xxxxx@10.0.0.5:3128", "10.0.0.5:3128"},
		{"HTTPS://proxy.example", "https://proxy.example:443", "proxy.example:443"},
		{"socks5://u:p%40ss@[::1]:1080/", "socks5://u:xxxxx@[::1]:1080", "[::1]:1080"},
		{"socks5://host", "socks5://host:1080", "host:1080"},
		{"http://user@host:8080", "http://user@host:8080", "host:8080"},
	}
	for _, c := range ok {
		p, err := proxy.Parse(c.raw)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.raw, err)
			continue
		}
		if p.String() != c.str || p.Addr() != c.addr {
			t.Errorf("Parse(%q) = %s at %s, want %s at %s", c.raw, p, p.Addr(), c.str, c.addr)
		}
	}
	p, _ := proxy.Parse("socks5://u:p%40ss@h")
	if p.Password != "p@ss" {
		t.Errorf("password %q, want p@ss", p.Password)
	}
	bad := []struct{ raw, want string }{
		{"ftp://u:s3cret@h:21", "scheme"},
		{"socks5h://u:s3cret@h", "socks5h"},
		{"http://u:s3cret@:8080", "no host"},
		{"http://u:s3cret@h:0", "port"},
		{"http://u:s3cret@h:99999", "port"},
		{"http://u:s3cret@h:8080/path", "no path"},
		{"http://u:s3cret@h:8080?q=1", "no path"},
		{"http://u:s3cret@h:80 80", "not a URL"},
		{"h:8080", "scheme"},
	}
	for _, c := range bad {
		_, err := proxy.Parse(c.raw)
		if err == nil {
			t.Errorf("Parse(%q) took it", c.raw)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Parse(%q): %v; want %q in it and no password", c.raw, err, c.want)
		}
	}
	for raw, want := range map[string]string{
		"http://u:s3cret@h:1":      "http://u:xxxxx@h:1",
		"http://u:s3cret@h:80 80":  "http://u:xxxxx@h:80 80",
		"u:s3cret@h:1":             "u:xxxxx@h:1",
		"http://h:1/a@b":           "http://h:1/a@b",
		"http://user@h:1":          "http://user@h:1",
		"socks5://a:b:c@d@h:1/x@y": "socks5://a:xxxxx@h:1/x@y",
	} {
		if got := proxy.Redact(raw); got != want {
			t.Errorf("Redact(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestRotationRestsWithBackoff(t *testing.T) {
	a, _ := proxy.Parse("http://a:1")
	b, _ := proxy.Parse("http://b:1")
	r := proxy.NewRotation([]*proxy.Proxy{a, b}, time.Second, 4*time.Second)
	now := time.Unix(1000, 0)
	var got []string
	for range 4 {
		p, _ := r.Next(now)
		got = append(got, p.Host)
	}
	if strings.Join(got, "") != "abab" {
		t.Fatalf("turns %v, want a b a b", got)
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		d, fresh := r.Rest(a, now)
		if d != want || !fresh {
			t.Errorf("failure %d: rested %s (fresh %v), want %s", i+1, d, fresh, want)
		}
		if d2, fresh2 := r.Rest(a, now.Add(d/2)); fresh2 || d2 != d/2 {
			t.Errorf("failure while resting: %s fresh %v; want the rest left (%s), not fresh", d2, fresh2, d/2)
		}
		for range 3 {
			if p, _ := r.Next(now); p != b {
				t.Fatalf("a resting proxy was handed out")
			}
		}
		now = now.Add(d)
	}
	r.OK(a)
	if d, _ := r.Rest(a, now); d != time.Second {
		t.Errorf("after a success the rest is %s, want the base again", d)
	}
	r.Rest(b, now)
	if p, wait := r.Next(now.Add(time.Second / 2)); p != nil || wait != time.Second/2 {
		t.Errorf("all resting: got %v, wait %s; want nil and 500ms", p, wait)
	}
	st := r.States()
	if len(st) != 2 || st[0].Proxy != "http://a:1" || st[0].Failures != 9 || st[1].Failures != 1 {
		t.Errorf("states %+v", st)
	}
}

// A rest decided elsewhere (another process's, read from their shared row) benches the proxy
// here too, without counting a failure here; one a failure here led to is ended by OK.
func TestRotationTakesSharedRests(t *testing.T) {
	a, _ := proxy.Parse("http://a:1")
	b, _ := proxy.Parse("http://b:1")
	r := proxy.NewRotation([]*proxy.Proxy{a, b}, time.Second, 4*time.Second)
	now := time.Unix(1000, 0)
	r.RestUntil(a, now.Add(time.Minute), false)
	r.RestUntil(a, now.Add(time.Second), false) // an older view does not shorten it
	if p, _ := r.Next(now.Add(30 * time.Second)); p != b {
		t.Fatalf("handed out %v during a shared rest; want b", p)
	}
	if r.OK(a) || r.States()[0].Failures != 0 {
		t.Errorf("a rest from elsewhere counted as a failure here: %+v", r.States()[0])
	}
	if p, _ := r.At(0, now.Add(time.Minute)); p != a {
		t.Errorf("a is not back when its shared rest ends")
	}
	r.RestUntil(b, now.Add(time.Second), true)
	if !r.OK(b) || r.OK(b) || r.States()[1].Failures != 1 {
		t.Errorf("a failure here: OK should end its streak once; states %+v", r.States())
	}
}

// get fetches target through p over a plain HTTP client whose every connection is dialed through it.
func get(t *testing.T, p *proxy.Proxy, target string) (string, error) {
	t.Helper()
	return getTLS(t, p, nil, target)
}

// getTLS is get with the TLS configuration of an https:// proxy's connection.
func getTLS(t *testing.T, p *proxy.Proxy, cfg *tls.Config, target string) (string, error) {
	t.Helper()
	d := p.Dialer(&net.Dialer{Timeout: 5 * time.Second}, cfg)
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get(target)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// An https:// proxy is spoken to over TLS, its certificate verified: through a loopback one
// whose certificate the client trusts, a page arrives through the tunnel inside TLS; with the
// system's roots the handshake fails as the proxy's failure (ErrProxy), its password unsaid.
func TestDialThroughHTTPSProxy(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.URL.Path) }))
	defer site.Close()
	px, roots := proxytest.NewHTTPS(t, proxytest.HTTPOptions{User: "erin", Password: "tls-s3cret"})
	p, err := proxy.Parse(px.URL)
	if err != nil || p.Scheme != "https" {
		t.Fatalf("Parse(%s): %v, %v", px.URL, p, err)
	}
	body, err := getTLS(t, p, &tls.Config{RootCAs: roots}, site.URL+"/x")
	if err != nil || body != "hello /x" || px.Tunnels.Load() != 1 {
		t.Fatalf("through %s: %q, %v (tunnels %d); want hello /x through one tunnel", p, body, err, px.Tunnels.Load())
	}
	_, err = get(t, p, site.URL+"/x")
	if !errors.Is(err, proxy.ErrProxy) || !strings.Contains(err.Error(), "TLS handshake with the proxy") || strings.Contains(err.Error(), "tls-s3cret") {
		t.Errorf("an https proxy whose certificate is not trusted: %v; want ErrProxy naming the TLS handshake, no password", err)
	}
	if px.Tunnels.Load() != 1 {
		t.Errorf("a tunnel was opened over an unverified TLS connection")
	}
}

func TestDialThroughRealProxies(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.URL.Path) }))
	defer site.Close()
	httpP := proxytest.NewHTTP(t, proxytest.HTTPOptions{User: "alice", Password: "s3cret"})
	socksP := proxytest.NewSOCKS5(t, "bob", "hunter2")
	for _, raw := range []string{httpP.URL, socksP.URL} {
		p, err := proxy.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		body, err := get(t, p, site.URL+"/x")
		if err != nil || body != "hello /x" {
			t.Errorf("through %s: %q, %v", p, body, err)
		}
	}
	if httpP.Tunnels.Load() != 1 || socksP.Tunnels.Load() != 1 {
		t.Errorf("tunnels: http %d, socks %d; want 1 each", httpP.Tunnels.Load(), socksP.Tunnels.Load())
	}

	// The proxy's own failures are ErrProxy and never show the password.
	fails := map[string]string{
		"http wrong password":  strings.Replace(httpP.URL, "s3cret", "wrong1", 1),
		"socks wrong password": strings.Replace(socksP.URL, "hunter2", "wrong2", 1),
		"refusing":             proxytest.Refusing(t, "carol", "pa55word"),
	}
	for name, raw := range fails {
		p, _ := proxy.Parse(raw)
		_, err := get(t, p, site.URL+"/x")
		if !errors.Is(err, proxy.ErrProxy) {
			t.Errorf("%s: %v; want ErrProxy", name, err)
		}
		if err != nil && (strings.Contains(err.Error(), "wrong") || strings.Contains(err.Error(), "pa55word")) {
			t.Errorf("%s: the error shows the password: %v", name, err)
		}
	}
	if httpP.Refused.Load() != 1 {
		t.Errorf("the http proxy refused %d CONNECTs, want 1", httpP.Refused.Load())
	}

	// A target the proxy cannot reach is the target's failure, not the proxy's.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	for _, raw := range []string{httpP.URL, socksP.URL} {
		p, _ := proxy.Parse(raw)
		_, err := p.Dialer(&net.Dialer{}, nil).DialContext(context.Background(), "tcp", dead)
		var op *net.OpError
		if errors.Is(err, proxy.ErrProxy) || !errors.As(err, &op) || op.Op != "dial" {
			t.Errorf("through %s to a closed port: %v; want a dial *net.OpError, not ErrProxy", p, err)
		}
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"CRAWLQ_PROXY_PASS": "s3cret", "DATABASE_URL": "postgres://db"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	got, err := proxy.Expand("http://u:${CRAWLQ_PROXY_PASS}@h:1", lookup)
	if err != nil || got != "http://u:s3cret@h:1" {
		t.Errorf("Expand: %q, %v", got, err)
	}
	for raw, want := range map[string]string{
		"http://u:${DATABASE_URL}@h:1":       "only environment variables CRAWLQ_PROXY_",
		"http://u:${CRAWLQ_PROXY_}@h:1":      "only environment variables",
		"http://u:${CRAWLQ_PROXY_A B}@h:1":   "only environment variables",
		"http://u:${CRAWLQ_PROXY_UNSET}@h:1": "CRAWLQ_PROXY_UNSET}: the environment variable is not set",
	} {
		if _, err := proxy.Expand(raw, lookup); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "postgres") {
			t.Errorf("Expand(%q): %v, want %q", raw, err, want)
		}
	}
}
