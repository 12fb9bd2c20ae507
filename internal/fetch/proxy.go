package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"crawlq/internal/proxy"
)

// Through a proxy (Config.Proxy) the address guard still holds for the target: its name is
// resolved here and each address judged before the proxy is asked for a tunnel to it, by
// address, so the proxy cannot resolve the name to somewhere else on its side (a proxy inside a
// VPC would otherwise reach that VPC's services for a crawled page).
//
// The proxy's own address is the spider's choice, not a crawled page's, and a proxy inside the
// VPC (a private address) is a common setup, so it is judged by a looser rule: private, shared
// (CGNAT), unique local and benchmarking addresses may be proxies; loopback only when loopback
// is allowed (AllowLoopback: on a Lambda function 127.0.0.1:9001 is its runtime API); cloud
// metadata, link-local, unspecified, multicast, special-purpose and reserved never (unless
// AllowPrivate, which allows everything).

// proxyClasses are the non-public classes a proxy's address may fall in.
var proxyClasses = map[string]bool{"private": true, "shared (CGNAT)": true, "unique local": true, "benchmarking": true}

// checkProxy returns a *RefusedError for an address a proxy may not be on.
func (g guard) checkProxy(addr netip.Addr) error {
	class := classify(addr)
	if class == "" || proxyClasses[class] || (class == "loopback" && g.allowLoopback) {
		return nil
	}
	return &RefusedError{Addr: addr.Unmap(), Class: class, Proxy: true}
}

func (g guard) proxyControl(network, address string, _ syscall.RawConn) error {
	addr, err := dialedAddr("dial proxy", network, address)
	if err != nil {
		return err
	}
	return g.checkProxy(addr)
}

// CheckProxyAddr judges the address of a proxy (see above): nil when a spider may use a proxy
// there, else a *RefusedError matching ErrForbiddenAddress. For a check at push of a proxy given
// by IP address.
func CheckProxyAddr(addr netip.Addr, allowLoopback, allowPrivate bool) error {
	if allowPrivate {
		return nil
	}
	return guard{allowLoopback: allowLoopback}.checkProxy(addr)
}

// ProxyDialer returns the dialer of connections through p with the address guard of cfg
// (AllowPrivate, AllowLoopback, ConnectTimeout) for the target and the proxy: what the Fetcher
// of a Config with a Proxy dials with, for other packages that connect on a crawl's behalf
// through a proxy (the browser pool's guard proxy).
func ProxyDialer(p *proxy.Proxy, cfg Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	cfg = cfg.withDefaults()
	g := guard{allowLoopback: cfg.AllowLoopback}
	forward := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivate {
		forward.Control = g.proxyControl
	}
	via := p.Dialer(forward, nil)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		var ips []netip.Addr
		if ip, err := netip.ParseAddr(host); err == nil {
			ips = []netip.Addr{ip}
		} else if ips, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
		// As a direct dial does: each address in turn, the refused ones skipped.
		var firstErr error
		for _, ip := range ips {
			if !cfg.AllowPrivate {
				if err := g.check(ip); err != nil {
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
			}
			c, err := via.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
			if err == nil {
				return c, nil
			}
			if errors.Is(err, proxy.ErrProxy) || ctx.Err() != nil {
				return nil, err // the proxy failed: another address of the target will not help
			}
			if firstErr == nil {
				firstErr = err
			}
		}
		if firstErr == nil {
			firstErr = &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("no address for %s", host)}
		}
		return nil, firstErr
	}
}
