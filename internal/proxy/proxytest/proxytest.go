// Package proxytest runs real proxies on loopback for tests: an HTTP proxy that opens CONNECT
// tunnels (with optional basic credentials, and a ban after a number of tunnels, as a proxy
// provider's exit address gets banned), a SOCKS5 server (github.com/armon/go-socks5), and an
// address that refuses connections.
package proxytest

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	socks5 "github.com/armon/go-socks5"
)

// HTTPOptions configure an HTTP proxy.
type HTTPOptions struct {
	User, Password string // required credentials; none when both are empty
	// BanAfter > 0: tunnels after the first BanAfter are answered by the proxy itself, as the
	// target would be by a site that banned the proxy's address: the request read from the
	// tunnel (plain HTTP) gets status 403 and BanBody.
	BanAfter int
	BanBody  string
}

// Proxy is a running test proxy.
type Proxy struct {
	URL     string       // its URL, credentials included
	Tunnels atomic.Int64 // tunnels opened (CONNECTs answered 200), banned ones included
	Banned  atomic.Int64 // requests answered with the ban
	Refused atomic.Int64 // CONNECTs refused for their credentials
	ln      net.Listener
	wg      sync.WaitGroup
}

// NewHTTP starts an HTTP CONNECT proxy on 127.0.0.1, stopped at the test's end.
func NewHTTP(t testing.TB, o HTTPOptions) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, URL: "http://" + userinfo(o.User, o.Password) + ln.Addr().String()}
	p.serveEach(t, new(sync.Map), func(c net.Conn) { p.serve(c, o) })
	return p
}

// NewHTTPS starts an HTTP CONNECT proxy spoken to over TLS (an https:// proxy) on 127.0.0.1,
// stopped at the test's end. Its certificate (valid for 127.0.0.1) is signed by nobody the
// system trusts: roots holds it, for a client's tls.Config.RootCAs.
func NewHTTPS(t testing.TB, o HTTPOptions) (p *Proxy, roots *x509.CertPool) {
	t.Helper()
	// httptest's server carries a certificate for 127.0.0.1: borrowed, its server never serves.
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	cert, roots := srv.TLS.Certificates[0], x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}})
	p = &Proxy{ln: ln, URL: "https://" + userinfo(o.User, o.Password) + ln.Addr().String()}
	p.serveEach(t, new(sync.Map), func(c net.Conn) { p.serve(c, o) })
	return p, roots
}

// closeWrite half-closes c: a TCP connection, or a TLS one (which says so to its peer).
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// serveEach serves every connection p.ln accepts with serve, each on its own goroutine, until
// the test ends: then the listener and the open connections (those accepted, and any others the
// caller put in conns) are closed and waited for.
func (p *Proxy) serveEach(t testing.TB, conns *sync.Map, serve func(net.Conn)) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			conns.Store(c, true)
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer conns.Delete(c)
				defer c.Close()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		p.ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		p.wg.Wait()
	})
}

func userinfo(user, pass string) string {
	if user == "" && pass == "" {
		return ""
	}
	return url.UserPassword(user, pass).String() + "@"
}

func (p *Proxy) serve(c net.Conn, o HTTPOptions) {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		fmt.Fprint(c, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
		return
	}
	if o.User != "" || o.Password != "" {
		want := "Basic " + base64.StdEncoding.EncodeToString([]byte(o.User+":"+o.Password))
		if req.Header.Get("Proxy-Authorization") != want {
			p.Refused.Add(1)
			fmt.Fprint(c, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\n\r\n")
			return
		}
	}
	n := p.Tunnels.Add(1)
	if o.BanAfter > 0 && n > int64(o.BanAfter) {
		fmt.Fprint(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, r.Body)
			p.Banned.Add(1)
			fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(o.BanBody), o.BanBody)
		}
	}
	up, err := net.Dial("tcp", req.Host)
	if err != nil {
		fmt.Fprint(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer up.Close()
	fmt.Fprint(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, br)
		up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(c, up)
	closeWrite(c)
	<-done
}

// NewSOCKS5 starts a SOCKS5 server on 127.0.0.1 requiring user and pass (none when both are
// empty), stopped at the test's end. Proxy.Tunnels counts its connections to targets.
func NewSOCKS5(t testing.TB, user, pass string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, URL: "socks5://" + userinfo(user, pass) + ln.Addr().String()}
	var conns sync.Map
	cfg := &socks5.Config{
		Logger: log.New(io.Discard, "", 0),
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err == nil {
				p.Tunnels.Add(1)
				conns.Store(c, true)
			}
			return c, err
		},
	}
	if user != "" || pass != "" {
		cfg.Credentials = socks5.StaticCredentials{user: pass}
	}
	srv, err := socks5.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.serveEach(t, &conns, func(c net.Conn) { _ = srv.ServeConn(c) })
	return p
}

// Refusing returns the URL of an HTTP proxy on a loopback port where nothing listens.
func Refusing(t testing.TB, user, pass string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + userinfo(user, pass) + addr
}
