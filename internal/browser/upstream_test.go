//go:build !windows

package browser

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"crawlq/internal/proxy"
	"crawlq/internal/proxy/proxytest"
)

// A page rendered with a Proxy goes through it (an HTTP CONNECT proxy and a SOCKS5 server, with
// credentials Chromium never sees), and a page whose proxy fails returns the proxy's error
// (proxy.ErrProxy), its password redacted.
func TestRendersThroughUpstreamProxies(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	p, dl := newTestPool(t, Config{})
	hp := proxytest.NewHTTP(t, proxytest.HTTPOptions{User: "alice", Password: "pw-http-1"})
	sp := proxytest.NewSOCKS5(t, "bob", "pw-socks-2")
	for _, tp := range []*proxytest.Proxy{hp, sp} {
		px, err := proxy.Parse(tp.URL)
		if err != nil {
			t.Fatal(err)
		}
		res := render(t, p, Request{URL: s.URL + "/js", Proxy: px})
		if !strings.Contains(res.HTML, `<li class="item">item-5</li>`) {
			t.Errorf("through %s: the rendered page lacks its items:\n%s", px, res.HTML)
		}
		if tp.Tunnels.Load() == 0 {
			t.Errorf("%s opened no tunnel", px)
		}
	}
	if seen := dl.seen(); len(seen) != 0 {
		t.Errorf("pages with a proxy were dialed directly too: %v", seen)
	}
	if hp.Refused.Load() != 0 {
		t.Errorf("the HTTP proxy refused %d CONNECTs for their credentials", hp.Refused.Load())
	}

	px, _ := proxy.Parse(proxytest.Refusing(t, "carol", "pw-refusing-3"))
	res, err := p.Render(context.Background(), Request{URL: s.URL + "/js", Proxy: px, Timeout: 20 * time.Second})
	if !errors.Is(err, proxy.ErrProxy) || strings.Contains(err.Error(), "pw-refusing-3") {
		t.Fatalf("through a refusing proxy: %v (result %v); want proxy.ErrProxy without the password", err, res != nil)
	}
}
