package browser

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"crawlq/internal/fetch"
	"crawlq/internal/proxy"
)

// A Request with a Proxy is rendered in a browser context whose proxy server is a guard proxy of
// its own (one per upstream proxy, started at its first page): its dialer reaches each target
// through the upstream with the fetcher's rules (fetch.ProxyDialer: the target resolved and
// judged here, the proxy asked for the address; the proxy's own address by the proxies' rule).
// The upstream's credentials stay in this process: Chromium only ever talks to loopback.

// via returns the guard proxy that goes through px, starting it at its first use.
func (p *Pool) via(px *proxy.Proxy) (*guardProxy, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if g := p.vias[px]; g != nil {
		return g, nil
	}
	through := fetch.ProxyDialer(px, fetch.Config{AllowLoopback: p.cfg.AllowLoopback, AllowPrivate: p.cfg.AllowPrivate, ConnectTimeout: 10 * time.Second})
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := through(ctx, network, addr)
		if errors.Is(err, fetch.ErrForbiddenAddress) && !errors.Is(err, proxy.ErrProxy) {
			p.mu.Lock()
			p.stats.Refused++
			p.mu.Unlock()
		}
		return c, err
	}
	g, err := newGuardProxy(dial, p.admit, p.log)
	if err != nil {
		return nil, fmt.Errorf("start the browser's guard proxy for %s: %w", px, err)
	}
	p.vias[px] = g
	return g, nil
}

// proxyBlame returns the upstream's failure when it failed since before (its count then) and the
// page failed or got a gateway error: Chromium only sees the guard proxy's 502 or a tunnel that
// would not open. nil when the page is not the proxy's failure.
func proxyBlame(g *guardProxy, before int64, res *Result, err error) error {
	if g == nil || g.failures.Load() == before {
		return nil
	}
	if err == nil && (res == nil || res.Status < 500) {
		return nil
	}
	if last := g.lastErr.Load(); last != nil {
		return *last
	}
	return nil
}
