package fetch

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"crawlq/internal/proxy"
	"crawlq/internal/proxy/proxytest"
)

func mustProxy(t *testing.T, raw string) *proxy.Proxy {
	t.Helper()
	p, err := proxy.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFetchThroughProxies(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<p>via "+r.URL.Path+"</p>")
	}))
	defer site.Close()
	tlsSite := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls") }))
	defer tlsSite.Close()
	hp := proxytest.NewHTTP(t, proxytest.HTTPOptions{User: "alice", Password: "s3cret"})
	sp := proxytest.NewSOCKS5(t, "bob", "hunter2")
	for _, tp := range []*proxytest.Proxy{hp, sp} {
		f, err := New(Config{AllowLoopback: true, Proxy: mustProxy(t, tp.URL)})
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.Fetch(context.Background(), site.URL+"/a")
		if err != nil || string(res.Body) != "<p>via /a</p>" {
			t.Errorf("through %s: %v", tp.URL, err)
		}
		// https: the tunnel carries the TLS of the target, verified as usual (here: refused,
		// the test server's certificate is not trusted), not of the proxy.
		_, err = f.Fetch(context.Background(), tlsSite.URL)
		if err == nil || Kind(err) != "connect" || Retryable(err) {
			t.Errorf("https through %s to an untrusted certificate: %v (kind %s)", tp.URL, err, Kind(err))
		}
		f.Close()
		if n := tp.Tunnels.Load(); n != 2 {
			t.Errorf("%s opened %d tunnels, want 2", tp.URL, n)
		}
	}
}

// The guard judges the target before the proxy is asked for it: a crawled page cannot reach the
// metadata service or a private address through a proxy (which would reach them on its side).
func TestProxyKeepsTheTargetGuard(t *testing.T) {
	hp := proxytest.NewHTTP(t, proxytest.HTTPOptions{})
	sp := proxytest.NewSOCKS5(t, "", "")
	for _, tp := range []*proxytest.Proxy{hp, sp} {
		f, err := New(Config{AllowLoopback: true, Proxy: mustProxy(t, tp.URL)})
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range []string{"http://169.254.169.254/latest/meta-data/", "http://10.1.2.3/", "http://[fd00:ec2::254]/", "http://[::ffff:192.168.1.1]/"} {
			_, err := f.Fetch(context.Background(), target)
			var re *RefusedError
			if !errors.As(err, &re) || re.Proxy || errors.Is(err, proxy.ErrProxy) || Kind(err) != "forbidden" {
				t.Errorf("%s through %s: %v (kind %s); want the target refused", target, tp.URL, err, Kind(err))
			}
		}
		if n := tp.Tunnels.Load(); n != 0 {
			t.Errorf("%s was asked for %d tunnels to refused targets", tp.URL, n)
		}
	}
}

func TestProxyAddressRule(t *testing.T) {
	cases := []struct {
		addr                  string
		loopback, ok, okLoopb bool
	}{
		{"203.0.113.9", false, true, true},
		{"10.0.0.5", false, true, true},
		{"172.16.8.1", false, true, true},
		{"100.64.0.10", false, true, true},
		{"fd12::1", false, true, true},
		{"198.18.0.1", false, true, true},
		{"127.0.0.1", true, false, true},
		{"::1", true, false, true},
		{"169.254.169.254", false, false, false},
		{"169.254.10.1", false, false, false},
		{"fd00:ec2::254", false, false, false},
		{"0.0.0.0", false, false, false},
		{"224.0.0.1", false, false, false},
		{"255.255.255.255", false, false, false},
	}
	for _, c := range cases {
		a := netip.MustParseAddr(c.addr)
		if got := CheckProxyAddr(a, false, false) == nil; got != c.ok {
			t.Errorf("proxy on %s: allowed %v, want %v", c.addr, got, c.ok)
		}
		if got := CheckProxyAddr(a, true, false) == nil; got != c.okLoopb {
			t.Errorf("proxy on %s with loopback allowed: allowed %v, want %v", c.addr, got, c.okLoopb)
		}
		if CheckProxyAddr(a, false, true) != nil {
			t.Errorf("proxy on %s refused with allow_private", c.addr)
		}
	}
	// Dialed: refused before connect, as the proxy's failure (rested, another tried), with the rule.
	f, err := New(Config{Proxy: mustProxy(t, "http://user:s3cret@169.254.169.254:3128")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Fetch(context.Background(), "http://203.0.113.9/")
	if !errors.Is(err, proxy.ErrProxy) || !errors.Is(err, ErrForbiddenAddress) || Kind(err) != "proxy" ||
		!strings.Contains(err.Error(), "proxy address 169.254.169.254 is a cloud metadata address") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("proxy on the metadata address: %v (kind %s)", err, Kind(err))
	}
}

func TestProxyFailureKind(t *testing.T) {
	f, err := New(Config{AllowLoopback: true, Proxy: mustProxy(t, proxytest.Refusing(t, "u", "s3cret"))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Fetch(context.Background(), "http://203.0.113.9/")
	if Kind(err) != "proxy" || !Retryable(err) || IsHostFailure(err) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("refusing proxy: %v: kind %s, retryable %v, host failure %v; want proxy, true, false, no password",
			err, Kind(err), Retryable(err), IsHostFailure(err))
	}
}
