package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	xproxy "golang.org/x/net/proxy"
)

// ContextDialer makes connections; *net.Dialer is one.
type ContextDialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// DialerFunc adapts a function to a ContextDialer.
type DialerFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// DialContext calls f.
func (f DialerFunc) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return f(ctx, network, addr)
}

// Dialer returns a dialer whose DialContext(ctx, "tcp", target) reaches target through p:
// an HTTP CONNECT tunnel (over TLS to the proxy for https://), or a SOCKS5 CONNECT with
// username/password authentication when p has credentials. forward makes the connection to
// the proxy itself (the caller's guard of the proxy's address goes there). tlsConfig is for
// https:// proxies; nil verifies the proxy's certificate against the system's roots.
//
// Give it targets as IP:port, resolved and checked by the caller: a name would be resolved by
// the proxy, out of the caller's sight.
//
// A failure of the proxy (unreachable, credentials refused, tunnel refused) is an *Error
// (ErrProxy). A proxy's answer that the target cannot be reached (CONNECT 502 or 504, SOCKS
// "host unreachable", "connection refused"...) is the target's failure: a *net.OpError of
// Op "dial", as a direct connection's would be.
func (p *Proxy) Dialer(forward ContextDialer, tlsConfig *tls.Config) ContextDialer {
	toProxy := DialerFunc(func(ctx context.Context, network, _ string) (net.Conn, error) {
		c, err := forward.DialContext(ctx, network, p.Addr())
		if err != nil {
			return nil, &Error{Proxy: p.String(), Err: fmt.Errorf("connect to the proxy: %w", err)}
		}
		if p.Scheme != "https" {
			return c, nil
		}
		cfg := tlsConfig.Clone()
		if cfg == nil {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" {
			cfg.ServerName = p.Host
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, &Error{Proxy: p.String(), Err: fmt.Errorf("TLS handshake with the proxy: %w", err)}
		}
		return tc, nil
	})
	if p.Scheme == "socks5" {
		var auth *xproxy.Auth
		if p.User != "" || p.hasPass {
			auth = &xproxy.Auth{User: p.User, Password: p.Password}
		}
		d, _ := xproxy.SOCKS5("tcp", p.Addr(), auth, toProxy) // it fails for no input
		cd := d.(xproxy.ContextDialer)
		return DialerFunc(func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := cd.DialContext(ctx, network, addr)
			if err == nil {
				return c, nil
			}
			if errors.Is(err, ErrProxy) || ctx.Err() != nil {
				return nil, err
			}
			for _, reply := range socksTargetReplies {
				if strings.Contains(err.Error(), reply) {
					return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("through proxy %s: %s", p, reply)}
				}
			}
			return nil, &Error{Proxy: p.String(), Err: err}
		})
	}
	return DialerFunc(func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := toProxy.DialContext(ctx, network, "")
		if err != nil {
			return nil, err
		}
		tc, err := p.connect(ctx, c, addr)
		if err != nil {
			c.Close()
			return nil, err
		}
		return tc, nil
	})
}

// socksTargetReplies are the SOCKS5 replies (as x/net words them) that blame the target.
var socksTargetReplies = []string{"network unreachable", "host unreachable", "connection refused", "TTL expired"}

// connect asks an HTTP proxy on c for a tunnel to addr.
func (p *Proxy) connect(ctx context.Context, c net.Conn, addr string) (net.Conn, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var b strings.Builder
	fmt.Fprintf(&b, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n", addr, addr)
	if p.User != "" || p.hasPass {
		fmt.Fprintf(&b, "Proxy-Authorization: Basic %s\r\n", base64.StdEncoding.EncodeToString([]byte(p.User+":"+p.Password)))
	}
	b.WriteString("\r\n")
	if _, err := c.Write([]byte(b.String())); err != nil {
		return nil, p.ioErr(ctx, err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return nil, p.ioErr(ctx, err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusGatewayTimeout:
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("through proxy %s: %s", p, resp.Status)}
	case resp.StatusCode == http.StatusProxyAuthRequired:
		return nil, &Error{Proxy: p.String(), Err: fmt.Errorf("CONNECT: %s (credentials missing or refused)", resp.Status)}
	default:
		return nil, &Error{Proxy: p.String(), Err: fmt.Errorf("CONNECT: %s", resp.Status)}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		// The target spoke first and the proxy's answer came in one read with its bytes.
		return &bufferedConn{Conn: c, r: br}, nil
	}
	return c, nil
}

func (p *Proxy) ioErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("proxy %s: %w", p, context.Cause(ctx))
	}
	return &Error{Proxy: p.String(), Err: fmt.Errorf("CONNECT: %w", err)}
}

// bufferedConn reads what a bufio.Reader took off the connection first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// Dial calls f without a deadline (golang.org/x/net/proxy's Dialer; it calls DialContext).
func (f DialerFunc) Dial(network, addr string) (net.Conn, error) {
	return f(context.Background(), network, addr)
}
